// `reload` (spec 1.5): crash and reopen the log as a seed. The seeded session is first built in a scratch
// Context (dsh's seed checks + the agent's constructor scan, spec 12) so a refused seed leaves the world as it
// was; then the world reopens with it (world.open(seed): sessions.create(id, {seed}), fresh folds, a new engine).
import { refusal } from './refusal.mjs';
import { setClock } from './clock.mjs';

export function reloadOp(world, comp) {
  const { mods } = world.dsh;
  return {
    async reload() {
      await comp.ready;
      const seed = world.session.events.map((e) => structuredClone(e));
      const before = seed.length;
      const scratch = new mods.cordis.Context();
      try {
        await scratch.plugin(mods['dsh-session'].SessionStore);
        let session;
        try {
          session = scratch.sessions.create(undefined, { seed });
        } catch (err) {
          const m = /seed (?:entry|event|\S+) (?:at )?(?:index |seq )(\d+)/.exec(err.message);
          return refusal('SeedError', 'seed', m ? Number(m[1]) : null, err.message);
        }
        try {
          new mods['dsh-agent-loop'].RuntimeContextProjection(scratch, session);
        } catch (err) {
          return refusal('ModelError', 'message-shape', null, `agent creation failed over the seeded log: ${err?.message ?? err}`);
        }
      } finally {
        scratch.registry?.dispose?.();
      }
      const session = await world.open(seed);
      setClock(session.events.at(-1)?.time ?? 0);
      return { generation: session.surface.replaceGeneration, appended: session.events.slice(before).map((e) => e.type) };
    },
  };
}
