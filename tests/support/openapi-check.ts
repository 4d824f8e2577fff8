/**
 * Every answer the tests receive from a gateway is checked against the OpenAPI document that
 * gateway serves (`/openapi.json`): its status must be documented for the operation, and its body
 * must match the documented schema. A mismatch fails the request, so the test that made it fails.
 * tests/support/app.ts registers each test app's gateways and runs the check in `call()`.
 */
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

interface Answer {
  $ref?: string;
  content?: Record<string, { schema?: unknown }>;
}
interface Operation {
  responses: Record<string, Answer>;
}
interface Doc {
  id: string;
  paths: Record<string, Record<string, Operation>>;
  /** Shared answers (`#/components/responses/<name>`). */
  shared: Record<string, Answer>;
  /** Path templates with their matchers, fewest parameters first (literal segments win). */
  templates: Array<{ template: string; re: RegExp }>;
}

const origins = new Set<string>();
const docs = new Map<string, Promise<Doc>>();
const validators = new Map<string, ValidateFunction>();
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats(ajv);

/** Operational routes a gateway serves outside its document. */
const UNDOCUMENTED = /^\/(health|ready|metrics|openapi\.json|docs)(\/|$)/;

export function registerGateway(url: string): void {
  origins.add(new URL(url).origin);
}

export function unregisterGateway(url: string): void {
  const origin = new URL(url).origin;
  origins.delete(origin);
  docs.delete(origin);
}

const pointer = (s: string) => encodeURIComponent(s.replace(/~/g, '~0').replace(/\//g, '~1'));

async function loadDoc(origin: string): Promise<Doc> {
  const res = await fetch(`${origin}/openapi.json`);
  if (res.status !== 200) throw new Error(`${origin}/openapi.json answered ${res.status}`);
  const doc = (await res.json()) as { paths: Doc['paths']; components?: { responses?: Doc['shared'] } };
  const id = `openapi:${origin}:${Date.now()}:${Math.random()}`;
  ajv.addSchema(doc, id);
  const templates = Object.keys(doc.paths)
    .map((template) => ({
      template,
      params: (template.match(/\{/g) ?? []).length,
      re: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    }))
    .sort((a, b) => a.params - b.params);
  return { id, paths: doc.paths, shared: doc.components?.responses ?? {}, templates };
}

/**
 * Checks one answer; throws an Error naming the operation and what does not match. Requests to
 * origins that are not a registered gateway, and to operational routes, are not checked.
 */
export async function checkAnswer(
  method: string,
  url: string,
  status: number,
  contentType: string | null,
  body: unknown,
  text: string,
): Promise<void> {
  const u = new URL(url);
  if (!origins.has(u.origin) || UNDOCUMENTED.test(u.pathname)) return;
  let docP = docs.get(u.origin);
  if (!docP) docs.set(u.origin, (docP = loadDoc(u.origin)));
  const doc = await docP;
  let pathname: string;
  try {
    pathname = decodeURIComponent(u.pathname);
  } catch {
    return; // not a path the router could match: nothing documented to compare with
  }
  const match = doc.templates.find((t) => t.re.test(pathname));
  const m = method.toLowerCase();
  const op = match ? doc.paths[match.template]![m] : undefined;
  // No such route (404 from the router, 405 for a method it lacks): nothing documented.
  if (!match || !op) return;
  const where = `${method} ${match.template} answered ${status}`;
  const key = [String(status), `${String(status)[0]}XX`, 'default'].find((k) => op.responses[k]);
  if (!key) throw new Error(`${where}: the OpenAPI document lists no such status for this operation`);
  // An answer is written in place or refers to a shared one.
  let documented = op.responses[key]!;
  let pointerTo = `paths/${pointer(match.template)}/${m}/responses/${key}`;
  if (documented.$ref) {
    const name = documented.$ref.replace('#/components/responses/', '');
    if (!doc.shared[name])
      throw new Error(`${where}: the document refers to a missing answer ${documented.$ref}`);
    documented = doc.shared[name]!;
    pointerTo = `components/responses/${pointer(name)}`;
  }
  if (status === 204 || !documented.content) {
    if (text.length > 0)
      throw new Error(`${where}: a body where the document describes none: ${text.slice(0, 300)}`);
    return;
  }
  const media = documented.content['application/json'];
  if (!media?.schema) throw new Error(`${where}: the document gives no JSON schema for this answer`);
  if (!contentType?.startsWith('application/json'))
    throw new Error(`${where}: content type ${contentType ?? '(none)'}, documented application/json`);
  const ref = `${doc.id}#/${pointerTo}/content/${pointer('application/json')}/schema`;
  let validate = validators.get(ref);
  if (!validate) validators.set(ref, (validate = ajv.compile({ $ref: ref })));
  if (!validate(body)) {
    const problems = (validate.errors ?? [])
      .slice(0, 5)
      .map((e) => `${e.instancePath || '(body)'} ${e.message ?? ''} ${JSON.stringify(e.params)}`)
      .join('; ');
    throw new Error(
      `${where}: the body does not match the OpenAPI document: ${problems}\nbody: ${text.slice(0, 500)}`,
    );
  }
}
