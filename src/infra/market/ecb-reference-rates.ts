/**
 * The ECB's euro reference rates as files (`ReferenceRateSource`): the historical file
 * (`eurofxref-hist.zip`, one CSV of every business day since 1999-01-04, newest first, `N/A` where a
 * currency was not published), the 90-day file and the daily file (the `gesmes:Envelope` XML). The
 * paths are fixed: nothing a caller sends goes into a URL.
 */
import { inflateRawSync } from 'node:zlib';
import type { RateDay } from '../../domain/currencies.js';
import type { ReferenceRateSource } from '../../domain/ports/fx-rates.js';
import { parseEurofxref } from './ecb-market-data-provider.js';
import { ProviderHttp, type ProviderHttpOptions } from './provider-http.js';

const HISTORY_PATH = '/stats/eurofxref/eurofxref-hist.zip';
const RECENT_PATH = '/stats/eurofxref/eurofxref-hist-90d.xml';
const LATEST_PATH = '/stats/eurofxref/eurofxref-daily.xml';

export class EcbReferenceRates implements ReferenceRateSource {
  readonly #http: ProviderHttp;

  constructor(options: ProviderHttpOptions) {
    this.#http = new ProviderHttp({ provider: 'ecb', label: 'ECB' }, options);
  }

  async history(): Promise<RateDay[]> {
    const what = 'historical reference rates';
    const response = await this.#http.getBytes(HISTORY_PATH, what);
    if (response.status !== 200) throw this.#http.statusFailure(what, response, undefined);
    const csv = firstZipEntry(response.bytes);
    const days = csv === undefined ? undefined : parseEurofxrefCsv(csv.toString('utf8'));
    if (days === undefined) throw this.#http.failure('garbage', what, 'unparsable response body (not the zipped eurofxref CSV)');
    return days;
  }

  recent(): Promise<RateDay[]> {
    return this.#xml(RECENT_PATH, 'reference rates of the last 90 days');
  }

  latest(): Promise<RateDay[]> {
    return this.#xml(LATEST_PATH, 'daily reference rates');
  }

  async #xml(path: string, what: string): Promise<RateDay[]> {
    const response = await this.#http.get(path, what);
    if (response.status !== 200) throw this.#http.statusFailure(what, response, undefined);
    const days = parseEurofxref(response.text);
    if (days === undefined) throw this.#http.failure('garbage', what, 'unparsable response body (not the eurofxref XML)');
    return days.map((d) => ({ date: d.date, rates: new Map([...d.rates].map(([currency, rate]) => [currency, rate.value])) }));
  }
}

const RATE = /^\d+(?:\.\d+)?$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/**
 * The rows of ECB's historical CSV (`Date,USD,JPY,…,` with a trailing comma on every line), oldest
 * first, without the `N/A` cells; `undefined` when the text is not that file.
 */
export function parseEurofxrefCsv(text: string): RateDay[] | undefined {
  const lines = text.split(/\r?\n/).filter((line) => line.trim().length > 0);
  const header = lines[0]?.split(',').map((cell) => cell.trim());
  if (header === undefined || header[0] !== 'Date' || header.length < 2) return undefined;
  const days: RateDay[] = [];
  for (const line of lines.slice(1)) {
    const cells = line.split(',');
    const date = cells[0]?.trim() ?? '';
    if (!DATE.test(date)) return undefined;
    const rates = new Map<string, number>();
    for (let i = 1; i < header.length; i++) {
      const currency = header[i]!;
      const cell = cells[i]?.trim() ?? '';
      if (!/^[A-Z]{3}$/.test(currency) || !RATE.test(cell)) continue;
      rates.set(currency, Number(cell));
    }
    if (rates.size > 0) days.push({ date, rates });
  }
  if (days.length === 0) return undefined;
  return days.sort((a, b) => a.date.localeCompare(b.date));
}

/** The most bytes the historical file may inflate to. */
const MAX_UNZIPPED_BYTES = 64 * 1024 * 1024;

/** The bytes of a zip archive's first file (stored or deflated), or `undefined` when `zip` is not a zip archive. */
export function firstZipEntry(zip: Uint8Array): Buffer | undefined {
  const bytes = Buffer.from(zip.buffer, zip.byteOffset, zip.byteLength);
  // The end-of-central-directory record is the last 22 bytes, plus a comment of up to 65,535.
  let end = -1;
  for (let at = bytes.length - 22; at >= Math.max(0, bytes.length - 22 - 65_535); at--) {
    if (bytes.readUInt32LE(at) === 0x06054b50) {
      end = at;
      break;
    }
  }
  if (end < 0) return undefined;
  const central = bytes.readUInt32LE(end + 16);
  if (central + 46 > bytes.length || bytes.readUInt32LE(central) !== 0x02014b50) return undefined;
  const method = bytes.readUInt16LE(central + 10);
  const compressedSize = bytes.readUInt32LE(central + 20);
  const local = bytes.readUInt32LE(central + 42);
  if (local + 30 > bytes.length || bytes.readUInt32LE(local) !== 0x04034b50) return undefined;
  const start = local + 30 + bytes.readUInt16LE(local + 26) + bytes.readUInt16LE(local + 28);
  const data = bytes.subarray(start, start + compressedSize);
  if (data.length !== compressedSize) return undefined;
  try {
    if (method === 0) return Buffer.from(data);
    // ECB's whole history is a few MB of CSV; a far larger inflation is not its file (and never fills the memory).
    if (method === 8) return inflateRawSync(data, { maxOutputLength: MAX_UNZIPPED_BYTES });
  } catch {
    return undefined;
  }
  return undefined;
}
