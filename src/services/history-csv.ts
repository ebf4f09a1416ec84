/**
 * History as CSV: the candles of a history answer, one row each, for pandas and spreadsheets. Made
 * from the cached JSON answer, so both formats always carry the same candles and one cache entry
 * serves both.
 */
import type { components } from '../generated/api.js';

type HistoryResponse = components['schemas']['HistoryResponse'];
type Candle = components['schemas']['Candle'];

/** The header row: the candle fields in the order of the JSON schema. */
export const HISTORY_CSV_COLUMNS = ['time', 'open', 'high', 'low', 'close', 'adj_close', 'volume'] as const satisfies ReadonlyArray<keyof Candle>;

/** RFC 4180 ends records with CRLF. */
const EOL = '\r\n';

/**
 * The CSV of a history answer's JSON body: the header row, then a row per candle in the answer's
 * (ascending) order. Numbers are written as JSON writes them, so a reader gets the JSON values back;
 * null is an empty field. No field needs quoting: times are ISO 8601 and the rest are numbers.
 */
export function historyCsv(historyJson: string): string {
  const { data } = JSON.parse(historyJson) as HistoryResponse;
  const rows = [HISTORY_CSV_COLUMNS.join(',')];
  for (const candle of data.candles) rows.push(HISTORY_CSV_COLUMNS.map((column) => String(candle[column] ?? '')).join(','));
  return rows.join(EOL) + EOL;
}
