/**
 * The currency the console shows prices in (`currency=`, docs/currencies.md): one choice for the symbol
 * page and the watchlist, remembered in localStorage. Empty means as listed (no conversion).
 */
import { useState } from 'preact/hooks';

/** The codes the contract's `currency` parameter takes: EUR and the ECB's reference-rate currencies. */
export const CURRENCIES = [
  'AUD', 'BGN', 'BRL', 'CAD', 'CHF', 'CNY', 'CZK', 'DKK', 'EUR', 'GBP', 'HKD', 'HUF', 'IDR', 'ILS', 'INR', 'ISK', 'JPY', 'KRW', 'MXN', 'MYR', 'NOK', 'NZD', 'PHP',
  'PLN', 'RON', 'SEK', 'SGD', 'THB', 'TRY', 'USD', 'ZAR',
] as const;
const CURRENCY_KEY = 'mds.currency';

function loadCurrency(): string {
  const stored = localStorage.getItem(CURRENCY_KEY) ?? '';
  return (CURRENCIES as readonly string[]).includes(stored) ? stored : '';
}

/** The chosen currency (`''` for as listed) and how to change it. */
export function useCurrency(): [string, (next: string) => void] {
  const [currency, setCurrency] = useState<string>(loadCurrency);
  const choose = (next: string) => {
    setCurrency(next);
    localStorage.setItem(CURRENCY_KEY, next);
  };
  return [currency, choose];
}

/** The `currency` query parameter of a choice: absent for as listed. */
export function currencyQuery(currency: string): { currency?: string } {
  return currency === '' ? {} : { currency };
}

export function CurrencySelect({ value, onChange }: { value: string; onChange: (next: string) => void }) {
  return (
    <label class="currency">
      Currency{' '}
      <select name="currency" value={value} onChange={(e) => onChange((e.currentTarget as HTMLSelectElement).value)}>
        <option value="">As listed</option>
        {CURRENCIES.map((code) => (
          <option key={code} value={code}>
            {code}
          </option>
        ))}
      </select>
    </label>
  );
}
