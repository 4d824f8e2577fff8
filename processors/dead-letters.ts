/** Moved to core/dead-letters.ts; this re-export goes once no module imports it here. */
export * from '../core/dead-letters';
