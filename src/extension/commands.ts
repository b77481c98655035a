/** Every command the extension contributes, in one table (ids match package.json). */
export const COMMANDS = {
  estimateFootprint: 'fsdpLens.estimateFootprint',
  measureExactly: 'fsdpLens.measureExactly',
  chooseModel: 'fsdpLens.chooseModel',
  compareMeasuredRun: 'fsdpLens.compareMeasuredRun',
  chooseWhatToEstimate: 'fsdpLens.chooseWhatToEstimate',
  setWorldSize: 'fsdpLens.setWorldSize',
  setGpu: 'fsdpLens.setGpu',
  showLog: 'fsdpLens.showLog',
  openExample: 'fsdpLens.openExample',
} as const;
