/**
 * The compute tasks by name: what a worker thread of the pool runs, and what the pool runs on the
 * calling thread when a task is too small to hand over. Each takes plain data and gives a string or bytes.
 */
import { historyAnswer } from '../../domain/history-answer.js';
import { indicatorsAnswer } from '../../domain/indicators/answer.js';
import { etagOf } from '../../domain/sent-json.js';
import { answerFile, pageFile } from './export-files.js';

/** A JSON answer as written on its thread: its UTF-8 bytes (moved, not copied, to the event loop) and ETag. */
export interface EncodedJson {
  bytes: Uint8Array;
  etag: string;
}

/** Not `Buffer.from`: a small Buffer shares the pool's ArrayBuffer, which must not move; these bytes have their own. */
const UTF8 = new TextEncoder();

/** `json` encoded and hashed where it was written. */
function encoded(json: string): EncodedJson {
  const bytes = UTF8.encode(json);
  return { bytes, etag: etagOf(bytes) };
}

export const TASKS = {
  /** Nothing: answered once a thread has loaded every module above (`ComputePool.warm`). */
  warm: (_input: null) => 'warm',
  indicators: (input: Parameters<typeof indicatorsAnswer>[0]) => encoded(indicatorsAnswer(input)),
  historyAnswer: (input: Parameters<typeof historyAnswer>[0]) => encoded(historyAnswer(input)),
  exportAnswer: answerFile,
  exportPage: pageFile,
} as const;

export type TaskName = keyof typeof TASKS;
export type TaskInput<K extends TaskName> = Parameters<(typeof TASKS)[K]>[0];
export type TaskOutput<K extends TaskName> = ReturnType<(typeof TASKS)[K]>;

/** What the pool posts to a worker. */
export interface TaskMessage<K extends TaskName = TaskName> {
  name: K;
  input: TaskInput<K>;
}

/** Runs `message` on this thread. */
export function runTask<K extends TaskName>(message: TaskMessage<K>): TaskOutput<K> {
  return (TASKS[message.name] as (input: TaskInput<K>) => TaskOutput<K>)(message.input);
}
