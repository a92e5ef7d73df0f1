// One dsh composition per protocol session: a plain cordis Context with dsh's services, as the harness
// composes them (spec 0; dsh-npm-facts "the services run in a plain cordis Context"). `reset` builds a
// new one, so configuration and engine state are discarded with the session.
import { foldError, CLAIM } from './refusal.mjs';

/** The projection units the adapter reads, folded per committed event with dsh's own unit definitions
 * (TokenMeter registers them with `sessionProjections`). A unit whose `apply` throws is stuck from that
 * event on: the protocol's "null once its claim fold threw; it stays null" (spec 5.1); one the meter did not
 * register is stuck from the start. */
const UNITS = ['contextPressure', 'tokenUsage', 'contextBreakdown'];

export class World {
  constructor(dsh) {
    this.dsh = dsh;
    this.ctx = null;
    this.session = null;
    this.units = {};
    this.observers = [];
  }

  async open(seed) {
    if (this.ctx) this.ctx.registry?.dispose?.();
    const { mods } = this.dsh;
    const ctx = new mods.cordis.Context();
    await ctx.plugin(mods['dsh-session'].SessionStore);
    await ctx.plugin(mods['dsh-session-projection'].SessionProjectionRegistry);
    await ctx.plugin(mods['dsh-token-meter'].TokenMeter);
    this.ctx = ctx;
    this.units = {};
    for (const key of UNITS) {
      const reg = ctx.sessionProjections.registrations.get(key);
      // a unit the meter did not register has no value to read: answered as stuck from the start (its part null)
      this.units[key] = reg ? { def: reg.def, state: reg.def.init(), error: null, changedAt: null }
        : { def: null, state: null, changedAt: null,
          error: { type: 'ModelError', rule: 'unregistered', seq: null, message: `dsh's token meter registered no '${key}' projection unit` } };
    }
    ctx.on('session/event', (session, event) => {
      if (session === this.session) this.observe(event);
    });
    // A seeded session (reload): its constructor seed does not publish, so fold it here.
    this.session = seed === undefined ? ctx.sessions.create() : ctx.sessions.create(undefined, { seed });
    if (seed !== undefined) for (const event of this.session.events) this.observe(event);
    return this.session;
  }

  observe(event) {
    for (const unit of Object.values(this.units)) {
      if (unit.error) continue;
      try {
        const next = unit.def.apply(unit.state, event);
        // the registry's change feed (`onChanged`) fires when the reference changes (spec 5.2)
        if (!Object.is(next, unit.state)) unit.changedAt = event.seq;
        unit.state = next;
      } catch (err) {
        unit.error = foldError(err, event.seq, CLAIM);
      }
    }
    for (const fn of this.observers) fn(event);
  }
}
