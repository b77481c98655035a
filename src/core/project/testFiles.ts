/** Which files of a project belong to its test suite (their callers and models are not the job's). */

/** A file of a test suite: under a `tests` or `test` folder, or named `test_*.py` / `*_test.py` / `conftest.py`. */
export function isTestFile(file: string): boolean {
  return /(^|[\\/])tests?[\\/]/.test(file) || /(^|[\\/])(test_[^\\/]*|[^\\/]*_test|conftest)\.py$/.test(file);
}
