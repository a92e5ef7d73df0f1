// The optional persistence views (docs/protocol.md "Optional: persistence views"; spec 1.6-1.7), read-only, over
// the world's log, each one call into dsh-session's main entry:
// * `closers` — `interruptedTurnClosers(events)`, the crash repair dsh-session-persistence's
//   `PersistenceCoordinator.prepareCore` appends on every load (`const closers = interruptedTurnClosers(storedEvents)
//   .map(adoptSessionEvent)`) before it seeds the session (the closers as the scan returns them);
// * `rows` — `packChunkRuns(events)`, the storage records the JSONL writer writes (rows, and verbatim events as
//   their seqs), and whether
//   `decodeStorageRecord` reads every record (as parsed JSON) back as the log's events;
// * `decode` — `decodeStorageRecord(record)` for one parsed record (a malformed row: the refusal `storage-row`).
import { isDeepStrictEqual } from 'node:util';
import { ProtocolError, refusal } from './refusal.mjs';

const plain = (value) => JSON.parse(JSON.stringify(value));

export function storageOps(world) {
  const session = world.dsh.mods['dsh-session'];
  return {
    closers() {
      let closers;
      try {
        closers = session.interruptedTurnClosers(world.session.events);
      } catch (err) {
        // the scan read a property of a missing value: no committed log dsh can repair (model: RepairScanError)
        if (err instanceof TypeError) return refusal('RepairScanError', 'repair-scan', null, err.message);
        throw err;
      }
      return { closers: plain(closers) };
    },
    rows() {
      const events = plain(world.session.events);
      const records = plain(session.packChunkRuns(world.session.events));
      let roundtrip;
      try {
        roundtrip = isDeepStrictEqual(plain(records.flatMap((record) => session.decodeStorageRecord(record))), events);
      } catch {
        roundtrip = false;
      }
      // a packed row as written, a verbatim event as its seq (its content is `events`' business; minted ids differ)
      return { records: records.map((record) => ('seq0' in record ? record : record.seq)), roundtrip };
    },
    decode(args) {
      if (!('record' in args)) throw new ProtocolError('bad-args', "missing argument 'record'");
      try {
        return { events: plain(session.decodeStorageRecord(args.record)) };
      } catch (err) {
        // validateRow's `malformed <tag> storage row: <why>` (model: StorageRowError)
        if (err instanceof Error && err.message.startsWith('malformed ')) return refusal('StorageRowError', 'storage-row', null, err.message);
        throw err;
      }
    },
  };
}
