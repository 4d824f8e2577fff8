/** Moved to shared/logger.ts (a leaf every layer may import); this re-export goes once no module imports it here. */
export * from '../shared/logger';
