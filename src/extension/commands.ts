/** Every command the extension contributes, in one table (ids match package.json). */
export const COMMANDS = {
  estimateFootprint: 'fsdpLens.estimateFootprint',
} as const;
