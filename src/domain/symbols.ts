/**
 * The symbol rule, for every reader of symbols (requests, configuration, upstream answers): what a
 * symbol may look like, its canonical form, and a list of them. The characters are the contract's
 * (`components.parameters.Symbol`, the `symbols` lists); a test holds the two equal, so a change to
 * either one fails until the other follows.
 */
import { InvalidRequestError } from './errors.js';

/** The longest symbol. */
export const MAX_SYMBOL_LENGTH = 32;
/** The most symbols one batch (or stream) may name. */
export const MAX_SYMBOLS = 50;

/**
 * One symbol as a regular-expression fragment, as the contract's patterns spell it: nothing an upstream
 * URL could read as structure. No slash, percent sign, `?`, `#` or whitespace (not in the set), and no
 * leading dot, so neither `.` nor `..` (a dot segment a URL resolves away) nor `.x` is a symbol.
 */
export const SYMBOL_CHARS = `[A-Za-z0-9^=-][A-Za-z0-9^.=-]{0,${MAX_SYMBOL_LENGTH - 1}}`;
/** The contract's pattern of one symbol. */
export const SYMBOL_PATTERN = `^${SYMBOL_CHARS}$`;
/** The contract's pattern of a comma-separated list of 1 to MAX_SYMBOLS symbols. */
export const SYMBOL_LIST_PATTERN = `^${SYMBOL_CHARS}(,${SYMBOL_CHARS}){0,${MAX_SYMBOLS - 1}}$`;
/** The characters a symbol may use, in words, for messages. */
export const SYMBOL_CHARS_IN_WORDS = 'A-Z a-z 0-9 ^ . = - (not starting with a dot)';

const SYMBOL = new RegExp(SYMBOL_PATTERN);

/** True when `value` is a symbol as the contract allows it (any case). */
export function isSymbol(value: string): boolean {
  return SYMBOL.test(value);
}

/** The canonical form of a valid symbol: upper case (symbols are case-insensitive). */
export function canonical(symbol: string): string {
  return symbol.toUpperCase();
}

/** Upper-cases a symbol after checking it (the contract already did for HTTP callers). Throws `InvalidRequestError` naming `path`. */
export function canonicalSymbol(symbol: string, path: string): string {
  if (!isSymbol(symbol)) throw new InvalidRequestError([{ path, message: `must be 1 to ${MAX_SYMBOL_LENGTH} characters of ${SYMBOL_CHARS_IN_WORDS}` }]);
  return canonical(symbol);
}

/**
 * `aapl,MSFT` -> `['AAPL', 'MSFT']`: 1 to MAX_SYMBOLS symbols, each valid, none repeated
 * (case-insensitively). Throws `InvalidRequestError` naming `path`.
 */
export function parseSymbolList(list: string, path: string): string[] {
  const raw = list.split(',');
  if (list.length === 0 || raw.length > MAX_SYMBOLS) {
    throw new InvalidRequestError([{ path, message: `must list 1 to ${MAX_SYMBOLS} symbols, comma-separated` }]);
  }
  const bad = raw.find((s) => !isSymbol(s));
  if (bad !== undefined) {
    throw new InvalidRequestError([{ path, message: `must list symbols of 1 to ${MAX_SYMBOL_LENGTH} characters of ${SYMBOL_CHARS_IN_WORDS} (got '${bad.slice(0, 40)}')` }]);
  }
  const symbols = raw.map(canonical);
  const seen = new Set<string>();
  for (const s of symbols) {
    if (seen.has(s)) throw new InvalidRequestError([{ path, message: `must not repeat a symbol ('${s}')` }]);
    seen.add(s);
  }
  return symbols;
}
