/**
 * Statements that read or write rows (SELECT, INSERT, UPDATE, DELETE, WITH): the ones the PGlite
 * adapters run as prepared statements. Any other (DDL, SET, a script) may change the schema, and
 * both sides of the embedded store forget what they kept per statement text after one
 * (./pglite.ts, ./pglite-thread.ts).
 */
export const ROW_STATEMENT = /^\s*(select|insert|update|delete|with)\b/i;
