// The world's UUIDs. dsh mints `compactionId = randomUUID()` (node:crypto) at `compaction/start`; the protocol
// (like its reference runtimes) names a compaction after the seq its start takes: `compaction-<seq>`. The
// adapter makes node:crypto's randomUUID answer that name (glue, like the faked clock: dsh still mints the id
// itself, where and when it does). Message ids and the command executor's instance token come from Web Crypto's
// crypto.randomUUID and stay random, except under mutation testing (SURFACECHECK_MUTATE): there they count from
// every new world, so the same requests after a `reset` get the same answers (the gate's pristine recordings,
// surfacecheck/mutate/pristine.py, compare answers by digest). The suite compares such ids by where they recur.
import { createRequire, syncBuiltinESMExports } from 'node:module';

const require = createRequire(import.meta.url);

export function install(world) {
  const crypto = require('node:crypto');
  crypto.randomUUID = () => `compaction-${world.session.seq}`;
  syncBuiltinESMExports();
  if (process.env.SURFACECHECK_MUTATE) {
    let minted = 0;
    const open = world.open.bind(world);
    world.open = (seed) => { minted = 0; return open(seed); };
    globalThis.crypto.randomUUID = () => {
      minted += 1;
      // the count leads: dsh slices the first 8 characters for the command executor's instance token
      return `${minted.toString(16).padStart(8, '0')}-0000-4000-8000-000000000000`;
    };
  }
}
