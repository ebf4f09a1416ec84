/**
 * The short text beside a tool's structured content, for the agent to read: a quote as one line, a
 * list as one line per item, candles, indicators and sessions as compact tables of rounded numbers
 * (at most `HISTORY_TEXT_ROWS` rows, saying how many there are and where the rest is), anything else
 * as compact JSON. Chosen by the shape of the answer's `data`, not per operation, so an operation
 * added to the contract gets a readable text too.
 */
import { columnName } from '../../domain/indicators/catalogue.js';
import type { components } from '../../generated/api.js';

type Quote = components['schemas']['Quote'];
type Candle = components['schemas']['Candle'];

/** Rows of candles (or indicators, or sessions) a tool's text shows; the structured content and the CSV resource carry all. */
export const HISTORY_TEXT_ROWS = 100;

/** Longest generic (JSON) text; the structured content carries the whole answer. */
const MAX_JSON_TEXT = 8_000;

type Row = Record<string, unknown>;

const isRow = (value: unknown): value is Row => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A number rounded for reading: `digits` decimals, or `digits` significant digits below 1 (a MACD of 0.00123 is not 0). */
function num(value: unknown, digits = 4): string {
  if (typeof value !== 'number') return value === null || value === undefined ? '-' : String(value);
  if (Number.isInteger(value)) return String(value);
  return String(Number(Math.abs(value) >= 1 ? value.toFixed(digits) : value.toPrecision(digits)));
}

/** `AAPL (Apple Inc.) 227.48 USD, +1.23 (+0.54%), market open, at 2026-11-26T15:59:00.000Z`. */
export function quoteLine(q: Quote): string {
  const sign = (n: number | null) => (n !== null && n >= 0 ? '+' : '');
  return `${q.symbol} (${q.name}) ${num(q.price)} ${q.currency}, ${sign(q.change)}${num(q.change)} (${sign(q.change_percent)}${num(q.change_percent, 2)}%), open ${num(q.open)} high ${num(q.high)} low ${num(q.low)} prev close ${num(q.prev_close)}, volume ${num(q.volume)}, market ${q.market_state}, at ${q.timestamp}`;
}

function table(rows: readonly Row[], columns: readonly string[]): string {
  return [columns.join(' '), ...rows.map((row) => columns.map((c) => num(row[c])).join(' '))].join('\n');
}

/** `, <first> to <last>` of a table's times; nothing when it has none. */
function span(times: readonly unknown[]): string {
  return times.length > 0 ? `, ${String(times[0])} to ${String(times.at(-1))}` : '';
}

/** What a table of the last `shown` of `count` rows says about the rest: where all of them are (`members` of the structured content, the CSV `resource`). */
function restNote(shown: number, count: number, members: string, resource: string | undefined): string {
  if (shown < count) return `\nShowing the last ${shown}. All ${count} are in the structured content (${members})${resource ? `, and as CSV in the resource ${resource}` : ''}.`;
  return resource ? `\nAs CSV: the resource ${resource}.` : '';
}

/** The last `HISTORY_TEXT_ROWS` candles as a table, saying how many there are and where the rest is. */
function historyText(data: Row, resource: string | undefined): string {
  const candles = (data.candles as Candle[] | undefined) ?? [];
  const shown = candles.slice(-HISTORY_TEXT_ROWS);
  const head = `${String(data.symbol)} ${String(data.interval)} candles (${String(data.currency ?? '')}, times UTC): ${candles.length} in all${span(candles.map((c) => c.time))}`;
  return `${head}.${restNote(shown.length, candles.length, 'data.candles', resource)}\n${table(shown as unknown as Row[], ['time', 'open', 'high', 'low', 'close', 'adj_close', 'volume'])}`;
}

/**
 * The studies of the last `HISTORY_TEXT_ROWS` bars as a table like history's: a row per bar time, a
 * column per series, named as the exports name them (`sma_20`, `macd_12_26_9_signal`).
 */
function indicatorsText(data: Row): string {
  const times = data.times as unknown[];
  const series: Array<[string, unknown[]]> = [];
  for (const [key, value] of Object.entries(data.studies as Row)) {
    if (Array.isArray(value)) series.push([columnName(key), value]);
    else if (isRow(value)) for (const [output, values] of Object.entries(value)) if (Array.isArray(values)) series.push([columnName(key, output), values]);
  }
  const from = Math.max(0, times.length - HISTORY_TEXT_ROWS);
  const rows = times.slice(from).map((time, i) => Object.fromEntries([['time', time], ...series.map(([name, values]) => [name, values[from + i]])]) as Row);
  const head = `${String(data.symbol)} ${String(data.interval)} indicators (times UTC): ${times.length} bars${span(times)}`;
  return `${head}.${restNote(rows.length, times.length, 'data.times, data.studies', undefined)}\n${table(rows, ['time', ...series.map(([name]) => name)])}`;
}

function sessionsText(data: Row): string {
  const sessions = (data.sessions as Row[] | undefined) ?? [];
  const shown = sessions.slice(0, HISTORY_TEXT_ROWS);
  const more = shown.length < sessions.length ? ` Showing the first ${shown.length}; all are in the structured content (data.sessions).` : '';
  return `${String(data.market)} sessions (${String(data.timezone)}; instants in UTC): ${sessions.length}.${more}\n${table(shown, ['date', 'open', 'close', 'break_start', 'break_end'])}`;
}

function itemLine(item: unknown): string | undefined {
  if (!isRow(item)) return undefined;
  if (typeof item.price === 'number' && typeof item.symbol === 'string' && typeof item.currency === 'string') return quoteLine(item as unknown as Quote);
  if (typeof item.market === 'string' && typeof item.state === 'string') {
    return `${item.market} (${String(item.name)}, ${String(item.timezone)}): ${item.state}, next open ${String(item.next_open ?? '-')}, next close ${String(item.next_close ?? '-')}${item.holiday ? `, holiday: ${typeof item.holiday === 'string' ? item.holiday : JSON.stringify(item.holiday)}` : ''}`;
  }
  if (typeof item.symbol === 'string' && typeof item.name === 'string') return `${item.symbol}: ${item.name}${item.exchange ? ` (${String(item.exchange)}${item.instrument_type ? `, ${String(item.instrument_type)}` : ''})` : ''}`;
  return undefined;
}

function jsonText(value: unknown): string {
  const text = JSON.stringify(value);
  return text.length <= MAX_JSON_TEXT ? text : `${text.slice(0, MAX_JSON_TEXT)}... (cut at ${MAX_JSON_TEXT} characters; the whole answer is the structured content)`;
}

/**
 * The text of a successful answer `body` (the REST JSON answer). `resource` is where the same data
 * is as a resource (history's CSV), when there is one.
 */
export function answerText(body: unknown, resource?: string): string {
  const data = isRow(body) && 'data' in body ? body.data : body;
  const notes: string[] = [];
  if (isRow(body) && Array.isArray(body.missing) && body.missing.length > 0) notes.push(`Unknown symbols: ${body.missing.join(', ')}.`);
  if (isRow(body) && typeof body.source === 'string') notes.push(`Source: ${body.source}.`);
  let main: string;
  if (isRow(data) && Array.isArray(data.candles)) main = historyText(data, resource);
  else if (isRow(data) && Array.isArray(data.times) && isRow(data.studies)) main = indicatorsText(data);
  else if (isRow(data) && Array.isArray(data.sessions)) main = sessionsText(data);
  else if (isRow(data) && typeof data.price === 'number') main = quoteLine(data as unknown as Quote);
  else if (Array.isArray(data)) {
    const lines = data.map(itemLine);
    main = lines.every((line) => line !== undefined) ? (lines.length > 0 ? lines.join('\n') : 'No results.') : jsonText(data);
  } else main = jsonText(data);
  return notes.length > 0 ? `${main}\n${notes.join(' ')}` : main;
}

/** A refusal or failure in words: the envelope's message and code, and when to retry (429, 503). */
export function errorText(status: number, envelope: { error?: unknown; code?: unknown } | undefined, retryAfterS: number | undefined): string {
  const message = typeof envelope?.error === 'string' ? envelope.error : `HTTP ${status}`;
  const code = typeof envelope?.code === 'number' ? envelope.code : status;
  const retry = retryAfterS !== undefined ? ` Retry after ${retryAfterS} s (Retry-After).` : '';
  return `${message} (code ${code}).${retry}`;
}
