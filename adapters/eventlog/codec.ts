/**
 * Avro codecs of event-log record values. Both use the schemas a Topic lists (oldest first, the
 * last one is the writer schema) and resolve whatever schema a record was written with into the
 * newest one, so old records stay readable after a schema change.
 *
 * - PlainAvroCodec: bare Avro binary (avsc), no framing. The local log stores, next to the bytes,
 *   which of the topic's schema versions wrote them.
 * - RegistryAvroCodec: the Confluent wire format (magic byte 0, 4-byte big-endian schema id, Avro
 *   binary), ids from a Confluent-API schema registry (@kafkajs/confluent-schema-registry; Apicurio's
 *   ccompat API in our stack). The writer schema is registered once per subject `<topic>-value`.
 *
 * Behind the small SchemaCodec interface so that the registry (or the whole Avro library) can be
 * swapped without touching the adapters.
 */
import { Type, type Resolver, type Schema } from 'avsc';
import { COMPATIBILITY, SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { TimeoutMiddleware } from 'mappersmith/middleware/timeout';
import type { Topic } from '../../schemas/topics';
import { errorMessage } from './common';

export interface SchemaCodec {
  /**
   * Encodes `values` with the topic's writer schema (the last of `topic.schemas`), one buffer
   * each, in order; rejects, naming the fields, when any of them does not fit the schema.
   */
  encode<T>(topic: Topic<T>, values: readonly T[]): Promise<Buffer[]>;
  /**
   * Decodes bytes made by `encode` for this topic into the topic's newest schema.
   * `writerVersion` (1-based position in `topic.schemas`) says which schema wrote bare bytes; a
   * codec whose bytes carry a schema id (the registry codec) ignores it. Default: the newest.
   */
  decode<T>(topic: Topic<T>, bytes: Buffer, writerVersion?: number): Promise<T>;
  /** The version `encode` writes with: `topic.schemas.length`. */
  writerVersion(topic: Topic<unknown>): number;
}

type AvroType = Type;

/** Compiled types of a topic's schemas, cached per Topic object. */
class TopicTypes {
  readonly versions: AvroType[];
  readonly reader: AvroType;
  /** Keyed `v<version>` (bare bytes) or `id<schema id>` (registry). */
  private readonly resolvers = new Map<string, Resolver | null>();

  constructor(readonly topic: Topic<unknown>) {
    if (topic.schemas.length === 0) throw new Error(`topic ${topic.name} lists no Avro schema`);
    this.versions = topic.schemas.map((s) => Type.forSchema(s as Schema));
    this.reader = this.versions[this.versions.length - 1];
  }

  get writer(): AvroType {
    return this.reader;
  }

  /** Where `encode` writes a record before copying it out at its size (grown on need). */
  private scratch = Buffer.allocUnsafe(4096);

  /**
   * Encodes with the writer schema after `headerBytes` bytes the caller fills (the registry's
   * framing); a value that does not fit names the offending fields. One buffer per record, of its
   * exact size and not zeroed first: avsc's `toBuffer` zeroes a new buffer, and framing it took
   * another buffer and a concat (issue 19: buffer allocation was about 10 % of the ingest
   * gateway's CPU).
   */
  encode(value: unknown, headerBytes = 0): Buffer {
    // The common case without a hook: a closure per record was about 1 % of the ingest gateway.
    if (!this.writer.isValid(value)) {
      const paths: string[] = [];
      this.writer.isValid(value, { errorHook: (path) => paths.push(path.join('.') || '(root)') });
      throw new Error(
        `invalid record for topic ${this.topic.name}: bad or missing field(s) ${paths.join(', ')}`,
      );
    }
    // avsc answers the end of the record, or minus the bytes still missing when it did not fit.
    let end = this.writer.encode(value, this.scratch, headerBytes);
    while (end < 0) {
      this.scratch = Buffer.allocUnsafe(Math.max(2 * this.scratch.length, this.scratch.length - end));
      end = this.writer.encode(value, this.scratch, headerBytes);
    }
    const out = Buffer.allocUnsafe(end);
    this.scratch.copy(out, headerBytes, headerBytes, end);
    return out;
  }

  /** Decodes bytes written by `writer` (one of the versions, or a registry schema) into the reader. */
  decodeWith(writer: AvroType, key: string, bytes: Buffer): unknown {
    let resolver = this.resolvers.get(key);
    if (resolver === undefined) {
      resolver =
        writer === this.reader || writer.equals(this.reader) ? null : this.reader.createResolver(writer);
      this.resolvers.set(key, resolver);
    }
    return resolver ? this.reader.fromBuffer(bytes, resolver) : this.reader.fromBuffer(bytes);
  }
}

const typesCache = new WeakMap<Topic<unknown>, TopicTypes>();
function typesOf(topic: Topic<unknown>): TopicTypes {
  let t = typesCache.get(topic);
  if (!t) {
    t = new TopicTypes(topic);
    typesCache.set(topic, t);
  }
  return t;
}

/** Bare Avro binary: what the local log stores (with the writer version in its own column). */
export class PlainAvroCodec implements SchemaCodec {
  async encode<T>(topic: Topic<T>, values: readonly T[]): Promise<Buffer[]> {
    const types = typesOf(topic);
    return values.map((v) => types.encode(v));
  }

  async decode<T>(topic: Topic<T>, bytes: Buffer, writerVersion?: number): Promise<T> {
    const types = typesOf(topic);
    const v = writerVersion ?? types.versions.length;
    const writer = types.versions[v - 1];
    if (!writer)
      throw new Error(`topic ${topic.name} has no schema version ${v} (it lists ${types.versions.length})`);
    return types.decodeWith(writer, `v${v}`, bytes) as T;
  }

  writerVersion(topic: Topic<unknown>): number {
    return topic.schemas.length;
  }
}

export const CONFLUENT_MAGIC_BYTE = 0;

export interface RegistryAvroCodecOptions {
  /** Base URL of the Confluent-compatible API, e.g. http://127.0.0.1:8090/apis/ccompat/v7 */
  url: string;
  /** Prepended to topic names in subjects (`<prefix><topic>-value`): the Kafka adapter's topic prefix. */
  subjectPrefix?: string;
  /** Compatibility level set on a subject registered for the first time. Default BACKWARD. */
  compatibility?: COMPATIBILITY;
  /** The longest a single request to the registry may take, in ms. Default REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
}

/** How many times a writer schema registration is tried before its error is thrown. */
const REGISTER_ATTEMPTS = 6;
/** The longest pause between two registration attempts. */
const REGISTER_MAX_PAUSE_MS = 2_000;
/**
 * The longest a single request to the registry may take. Without it a request the registry never
 * answers (the likely cause of a CI run's 60 s timeout in the registration race test) would hold
 * the caller forever; with it, the request fails and is tried again like any other failure.
 */
const REQUEST_TIMEOUT_MS = 5_000;

/** Avro in the Confluent wire format, schema ids from a schema registry. */
export class RegistryAvroCodec implements SchemaCodec {
  private readonly registry: SchemaRegistry;
  /** subject → registered id of the topic's writer schema (the promise, so concurrent callers share it). */
  private readonly writerIds = new Map<string, Promise<number>>();
  /** schema id → compiled writer type fetched from the registry. */
  private readonly writerTypes = new Map<number, Promise<AvroType>>();

  constructor(private readonly opts: RegistryAvroCodecOptions) {
    // mappersmith retries 5xx itself; keep it short so an outage surfaces as an error quickly.
    this.registry = new SchemaRegistry({
      host: opts.url,
      retry: { retries: 2, maxRetryTimeInSecs: 2 },
      middlewares: [TimeoutMiddleware(opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS)],
    });
  }

  subject(topic: Topic<unknown>): string {
    return `${this.opts.subjectPrefix ?? ''}${topic.name}-value`;
  }

  /**
   * Registers the topic's writer schema under `<topic>-value` (once; idempotent) and returns its id.
   * Processes that start together register a new subject at the same moment, and the registry
   * then refuses all but one of them setting its compatibility level (Apicurio: 409 "A rule named
   * 'COMPATIBILITY' already exists"); the registration is tried again, a few times with a pause,
   * and the retry finds the subject and the level in place. A request that gets no answer within
   * REQUEST_TIMEOUT_MS counts as a failure: against a registry that answers nothing, a registration
   * gives up after about 35 s (six attempts of 5 s and the pauses between them).
   */
  writerSchemaId(topic: Topic<unknown>): Promise<number> {
    const subject = this.subject(topic);
    let id = this.writerIds.get(subject);
    if (!id) {
      const schema = JSON.stringify(typesOf(topic).writer.schema());
      const compatibility = this.opts.compatibility ?? COMPATIBILITY.BACKWARD;
      const register = async (): Promise<number> => {
        for (let attempt = 1; ; attempt++) {
          try {
            const r = await this.registry.register(
              { type: SchemaType.AVRO, schema },
              { subject, compatibility },
            );
            return r.id;
          } catch (err) {
            if (attempt >= REGISTER_ATTEMPTS) throw err;
            if ((err as Error)?.name === 'ConfluentSchemaRegistryCompatibilityError') {
              // An operator's level ends the attempts; a failed request to fix the level does not.
              const kept = await this.completeLevel(subject, compatibility).then(
                (set) => !set,
                () => false,
              );
              if (kept) throw err;
            }
            await new Promise((r) => setTimeout(r, Math.min(REGISTER_MAX_PAUSE_MS, 100 * 2 ** attempt)));
          }
        }
      };
      id = register().catch((err: unknown) => {
        this.writerIds.delete(subject); // retry on the next call
        throw new Error(
          `cannot register schema ${subject} at ${this.opts.url}: ${describeRegistryError(err)}`,
        );
      });
      this.writerIds.set(subject, id);
    }
    return id;
  }

  async encode<T>(topic: Topic<T>, values: readonly T[]): Promise<Buffer[]> {
    const types = typesOf(topic);
    // Every value is checked before the first registration: a bad record fails without a request.
    const framed = values.map((v) => types.encode(v, 5));
    const id = await this.writerSchemaId(topic);
    for (const f of framed) {
      f.writeUInt8(CONFLUENT_MAGIC_BYTE, 0);
      f.writeInt32BE(id, 1);
    }
    return framed;
  }

  async decode<T>(topic: Topic<T>, bytes: Buffer): Promise<T> {
    if (bytes.length < 5 || bytes.readUInt8(0) !== CONFLUENT_MAGIC_BYTE) {
      throw new Error(
        `record of topic ${topic.name} is not in the Confluent wire format (magic byte ${bytes[0]})`,
      );
    }
    const id = bytes.readInt32BE(1);
    const writer = await this.writerType(id);
    return typesOf(topic).decodeWith(writer, `id${id}`, bytes.subarray(5)) as T;
  }

  writerVersion(topic: Topic<unknown>): number {
    return topic.schemas.length;
  }

  /**
   * A first registration is two requests: the schema, then the subject's compatibility level. When
   * the second one is lost (a timeout, a crash in between), the subject exists at the registry's
   * default level, and the client library refuses every later registration because that level is
   * not the one asked for. Apicurio's default is NONE (Confluent's is BACKWARD, which matches): a
   * subject found at NONE gets its level set here, and the registration is tried again. Any other
   * level was chosen by an operator and is kept. Answers whether the subject has (now) the level
   * asked for, so that the registration is tried again; false: an operator's level, kept.
   */
  private async completeLevel(subject: string, level: COMPATIBILITY): Promise<boolean> {
    const url = `${this.opts.url}/config/${encodeURIComponent(subject)}`;
    const timeout = this.opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    const headers = { 'Content-Type': 'application/vnd.schemaregistry.v1+json' };
    const current = await fetch(url, { headers, signal: AbortSignal.timeout(timeout) });
    if (!current.ok) throw new Error(`reading the level of ${subject}: HTTP ${current.status}`);
    const body = (await current.json()) as { compatibilityLevel?: string };
    const found = body.compatibilityLevel?.toUpperCase();
    // Already ours: another process set it after this one read it (processes starting together).
    if (found === level) return true;
    if (found !== 'NONE') return false;
    const set = await fetch(url, {
      method: 'PUT',
      headers,
      body: JSON.stringify({ compatibility: level }),
      signal: AbortSignal.timeout(timeout),
    });
    // 409: another process set it meanwhile (Apicurio's "rule already exists"); the retry checks.
    if (!set.ok && set.status !== 409) throw new Error(`setting the level of ${subject}: HTTP ${set.status}`);
    return true;
  }

  private writerType(id: number): Promise<AvroType> {
    let t = this.writerTypes.get(id);
    if (!t) {
      t = this.registry
        .getSchema(id)
        .then((s) => Type.forSchema((s as unknown as AvroType).schema() as Schema))
        .catch((err: unknown) => {
          this.writerTypes.delete(id);
          throw new Error(
            `cannot fetch schema id ${id} from ${this.opts.url}: ${describeRegistryError(err)}`,
          );
        });
      this.writerTypes.set(id, t);
    }
    return t;
  }
}

function describeRegistryError(err: unknown): string {
  const e = err as { status?: number; message?: string; originalError?: unknown };
  const msg = errorMessage(err);
  return typeof e?.status === 'number' && !msg.includes(String(e.status)) ? `HTTP ${e.status}: ${msg}` : msg;
}

/**
 * The values of an append's records, encoded in one call, in order. Every record needs a string
 * key; a record without one, or one that does not fit the schema, fails the whole append before
 * anything is written. `name` is the topic's physical name, for the message.
 */
export function encodeRecords<T>(
  codec: SchemaCodec,
  topic: Topic<T>,
  name: string,
  records: readonly { key: unknown; value: T }[],
): Promise<Buffer[]> {
  for (const r of records)
    if (typeof r.key !== 'string')
      return Promise.reject(new Error(`append to ${name}: every record needs a string key`));
  return codec.encode(
    topic,
    records.map((r) => r.value),
  );
}
