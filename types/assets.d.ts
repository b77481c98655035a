// Query files are bundled as text by esbuild's text loader.
declare module '*.scm' {
  const source: string;
  export default source;
}
