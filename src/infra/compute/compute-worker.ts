/**
 * The module every worker thread of the compute pool loads (piscina calls its default export once
 * per task). Bytes (an export file, an encoded JSON answer) go back to the event loop without a copy;
 * a string is copied once.
 */
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { runTask, type TaskMessage } from './tasks.js';

export default function computeTask(message: TaskMessage): unknown {
  const out = runTask(message);
  if (out instanceof Uint8Array) return move(out);
  // An encoded JSON answer: its bytes move with it (piscina's Transferable, through its public symbols).
  if (typeof out === 'object' && out.bytes instanceof Uint8Array) return move({ [transferableSymbol]: [out.bytes.buffer], [valueSymbol]: out });
  return out;
}
