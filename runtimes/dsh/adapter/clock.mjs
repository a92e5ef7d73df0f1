// The world's clock. dsh's Session.append stamps `time: Date.now()`; the protocol lets a request give
// the event's time (default: the previous event's, 0 for the first), so the adapter sets the clock
// before each append. Glue: dsh still assigns the time itself.
let now = 0;
const realNow = Date.now.bind(Date);
export function setClock(ms) { now = ms; }
export function clock() { return now; }
export function install() { Date.now = () => now; }
export { realNow };
