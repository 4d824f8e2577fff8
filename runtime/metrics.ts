/** Moved to shared/metrics.ts (a leaf every layer may import); this re-export goes once no module imports it here. */
export * from '../shared/metrics';
