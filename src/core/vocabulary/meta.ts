/** The release and where the rules' documentation lives. */
declare const __VERSION__: string | undefined;

/** The release, injected at build time from package.json. */
export const VERSION = typeof __VERSION__ === 'string' ? __VERSION__ : '0.0.0-dev';

/** Where the rules documentation lives online (the same file ships in the extension as docs/rules.md). */
export const RULES_DOC_URL = 'https://github.com/fsdp-lens/fsdp-lens/blob/main/docs/rules.md';
