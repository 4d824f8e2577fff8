/**
 * Child process of tests/fault/filelog.fault.test.ts: appends to a FileEventLog in `argv[2]` (segments
 * of `argv[3]` bytes when given) from
 * many concurrent callers, forever, and prints `ACK <event id>...` for each append once it has
 * resolved (that is, once the log says the records are durable). The test kills it with SIGKILL.
 */
import { FileEventLog } from '../../adapters/eventlog/file';
import { EVENTS_TOPIC, eventKey } from '../../schemas/topics';

async function main(): Promise<void> {
  const log = new FileEventLog({ dir: process.argv[2]!, segmentBytes: Number(process.argv[3]) || undefined });
  await log.ensureTopic(EVENTS_TOPIC);
  process.stdout.write('READY\n');
  let seq = 0;
  const caller = async (c: number): Promise<never> => {
    for (;;) {
      const batch = Array.from({ length: 1 + (seq % 40) }, () => {
        const n = seq++;
        const user = `u${n % 97}`;
        return {
          key: eventKey('ten', user),
          value: {
            tenant_id: 'ten',
            event_id: `${process.pid}-c${c}-${n}`,
            type: 'test.happened',
            user_id: user,
            occurred_at: 1_700_000_000_000 + n,
            received_at: Date.now(),
            attrs_json: JSON.stringify({ n, pad: 'p'.repeat(n % 300) }),
            actor_metadata_json: null,
            subject_json: null,
          },
        };
      });
      await log.append(EVENTS_TOPIC, batch);
      process.stdout.write(`ACK ${batch.map((r) => r.value.event_id).join(' ')}\n`);
    }
  };
  await Promise.all(Array.from({ length: 16 }, (_, c) => caller(c)));
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
