/**
 * Validation of every body and query against the JSON Schemas in schemas/http/ (ajv), with
 * messages that name the field. The same schemas build the OpenAPI document (http/openapi.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv, { type ErrorObject, type FuncKeywordDefinition, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { errors } from './errors';

export const SCHEMA_DIR = join(__dirname, '..', 'schemas', 'http');

/**
 * `x-max-bytes`: a string's length in UTF-8 bytes, for identifiers that become keys in a store
 * with a byte limit (the rank index, the event log's record keys). `maxLength` counts characters
 * (UTF-16 code units in ajv), which allows up to four bytes each. Limits: docs/operations.md.
 */
const maxBytes: FuncKeywordDefinition = {
  keyword: 'x-max-bytes',
  type: 'string',
  schemaType: 'number',
  errors: true,
  validate: function check(limit: number, data: string): boolean {
    if (Buffer.byteLength(data, 'utf8') <= limit) return true;
    (check as { errors?: Partial<ErrorObject>[] }).errors = [
      { keyword: 'x-max-bytes', message: `must be at most ${limit} UTF-8 bytes`, params: { limit } },
    ];
    return false;
  },
};

export interface SchemaSet {
  /** Every schema by $id, for the OpenAPI document. */
  all: Map<string, object>;
  /** Strict validator (JSON bodies): no type coercion. */
  get(id: string): ValidateFunction;
  /** Query-string validator: strings are coerced to the schema's numbers and booleans. */
  getQuery(id: string): ValidateFunction;
}

let shared: SchemaSet | null = null;

/** Loads schemas/http/*.json once per process. */
export function schemas(): SchemaSet {
  if (shared) return shared;
  const strict = new Ajv({
    allErrors: false,
    strict: true,
    allowUnionTypes: true,
    coerceTypes: false,
    useDefaults: true,
  });
  const coercing = new Ajv({
    allErrors: false,
    strict: true,
    allowUnionTypes: true,
    coerceTypes: true,
    useDefaults: true,
  });
  addFormats(strict);
  addFormats(coercing);
  strict.addKeyword(maxBytes);
  coercing.addKeyword(maxBytes);
  const all = new Map<string, object>();
  for (const f of readdirSync(SCHEMA_DIR)
    .filter((x) => x.endsWith('.json'))
    .sort()) {
    const schema = JSON.parse(readFileSync(join(SCHEMA_DIR, f), 'utf8')) as { $id?: string };
    if (!schema.$id) throw new Error(`schema ${f} has no $id`);
    strict.addSchema(schema);
    coercing.addSchema(schema);
    all.set(schema.$id, schema);
  }
  const compiled = (ajv: Ajv) => {
    const cache = new Map<string, ValidateFunction>();
    return (id: string) => {
      let fn = cache.get(id);
      if (!fn) {
        fn = ajv.getSchema(id);
        if (!fn) throw new Error(`unknown schema ${id}`);
        cache.set(id, fn);
      }
      return fn;
    };
  };
  shared = { all, get: compiled(strict), getQuery: compiled(coercing) };
  return shared;
}

/** Validates `data` (defaults applied in place); throws VALIDATION_ERROR naming the field. */
export function validateOrThrow<T>(
  schemaId: string,
  data: unknown,
  where: 'body' | 'query',
  code: 'VALIDATION_ERROR' | 'INVALID_INPUT' = 'VALIDATION_ERROR',
): T {
  const fn = where === 'query' ? schemas().getQuery(schemaId) : schemas().get(schemaId);
  if (!fn(data)) {
    const message = describeError(fn.errors?.[0], where);
    throw code === 'INVALID_INPUT' ? errors.invalidInput(message) : errors.validation(message);
  }
  return data as T;
}

/** One readable sentence for the first error, e.g. `body.name: must NOT have fewer than 1 characters`. */
export function describeError(e: ErrorObject | undefined, where: string): string {
  if (!e) return `${where}: invalid`;
  const path = e.instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : `${acc}.${p}`), where);
  switch (e.keyword) {
    case 'required':
      return `${path}.${(e.params as { missingProperty: string }).missingProperty} is required`;
    case 'additionalProperties':
      return `${path}.${(e.params as { additionalProperty: string }).additionalProperty} is not allowed`;
    case 'enum':
      return `${path} must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'type':
      return `${path} must be ${withArticle((e.params as { type: string }).type)}`;
    default:
      return `${path} ${e.message ?? 'is invalid'}`;
  }
}

function withArticle(type: string): string {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}
