/**
 * The batch-state helper of pipeline steps lives in core/batch-state.ts, where the reactions to
 * facts (core/, e.g. achievements) can use it too; the steps keep importing it from here.
 */
export * from '../../core/batch-state';
