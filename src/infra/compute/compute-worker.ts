/**
 * The module every worker thread of the compute pool loads (piscina calls its default export once
 * per task). Bytes go back to the event loop without a copy; a string is copied once.
 */
import { move } from 'piscina';
import { runTask, type TaskMessage } from './tasks.js';

export default function computeTask(message: TaskMessage): unknown {
  const out = runTask(message);
  return out instanceof Uint8Array ? move(out) : out;
}
