// The world's UUIDs. dsh mints `compactionId = randomUUID()` (node:crypto) at `compaction/start`; the protocol
// (like its reference runtimes) names a compaction after the seq its start takes: `compaction-<seq>`. The
// adapter makes node:crypto's randomUUID answer that name (glue, like the faked clock: dsh still mints the id
// itself, where and when it does). Message ids come from Web Crypto's crypto.randomUUID and stay random.
import { createRequire, syncBuiltinESMExports } from 'node:module';

const require = createRequire(import.meta.url);

export function install(world) {
  const crypto = require('node:crypto');
  crypto.randomUUID = () => `compaction-${world.session.seq}`;
  syncBuiltinESMExports();
}
