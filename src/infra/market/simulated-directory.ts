/**
 * The instruments the simulated provider knows: Yahoo Finance symbols (so switching to the `yahoo`
 * provider keeps them working) with plausible late-2026 orders of magnitude. Demo data, not reference data.
 */
import type { InstrumentType } from '../../domain/ports/market-data.js';

/** One simulated instrument: its identity and the level and behaviour its random walk stays around. */
export interface SimulatedInstrument {
  symbol: string;
  name: string;
  /** The exchange or venue, as a quote or a search result names it. */
  exchange: string;
  /** ISO 4217 code; London shares are quoted in pence (`GBp`) as Yahoo does. */
  currency: string;
  instrument_type: InstrumentType;
  /** The exchange's IANA zone; with the type it decides the trading calendar (`marketOf`). */
  timezone: string;
  /** The level the price wanders around today. */
  baseLevel: number;
  /** Typical daily move as a fraction of the price (0.01 = 1 %). */
  dailyVolatility: number;
  /** Typical volume of a whole session (0 where the venue reports none, as for FX). */
  dailyVolume: number;
  /** Decimals prices are rounded to. */
  decimals: number;
  /** Yearly trend of the level, as a log return; by type when absent (shares rise, currencies do not). */
  annualDrift?: number;
}

type Row = [symbol: string, name: string, baseLevel: number, dailyVolume: number, dailyVolatility?: number];
type Shared = Omit<SimulatedInstrument, 'symbol' | 'name' | 'baseLevel' | 'dailyVolume' | 'dailyVolatility' | 'decimals'> & {
  dailyVolatility: number;
  decimals?: number;
};

function group(shared: Shared, rows: Row[]): SimulatedInstrument[] {
  return rows.map(([symbol, name, baseLevel, dailyVolume, dailyVolatility]) => ({
    ...shared,
    symbol,
    name,
    baseLevel,
    dailyVolume,
    dailyVolatility: dailyVolatility ?? shared.dailyVolatility,
    decimals: shared.decimals ?? 2,
  }));
}

const NY = 'America/New_York';
const usStock = (exchange: string): Shared => ({ exchange, currency: 'USD', instrument_type: 'equity', timezone: NY, dailyVolatility: 0.017 });

/** Every simulated instrument; the first ten are the indices the service has always shown. */
export const SIMULATED_DIRECTORY: readonly SimulatedInstrument[] = [
  ...group({ exchange: 'SNP', currency: 'USD', instrument_type: 'index', timezone: NY, dailyVolatility: 0.009 }, [['^GSPC', 'S&P 500', 6650, 3_100_000_000]]),
  ...group({ exchange: 'DJI', currency: 'USD', instrument_type: 'index', timezone: NY, dailyVolatility: 0.008 }, [['^DJI', 'Dow Jones Industrial Average', 46_500, 420_000_000]]),
  ...group({ exchange: 'Nasdaq GIDS', currency: 'USD', instrument_type: 'index', timezone: NY, dailyVolatility: 0.012 }, [['^IXIC', 'NASDAQ Composite', 22_400, 8_200_000_000]]),
  ...group({ exchange: 'FTSE Index', currency: 'GBP', instrument_type: 'index', timezone: 'Europe/London', dailyVolatility: 0.007 }, [['^FTSE', 'FTSE 100', 9_600, 750_000_000]]),
  ...group({ exchange: 'XETRA', currency: 'EUR', instrument_type: 'index', timezone: 'Europe/Berlin', dailyVolatility: 0.009 }, [['^GDAXI', 'DAX Performance Index', 24_000, 70_000_000]]),
  ...group({ exchange: 'Osaka', currency: 'JPY', instrument_type: 'index', timezone: 'Asia/Tokyo', dailyVolatility: 0.011 }, [['^N225', 'Nikkei 225', 48_500, 150_000_000]]),
  ...group({ exchange: 'HKSE', currency: 'HKD', instrument_type: 'index', timezone: 'Asia/Hong_Kong', dailyVolatility: 0.012 }, [['^HSI', 'Hang Seng Index', 26_000, 2_800_000_000]]),
  ...group({ exchange: 'Shanghai', currency: 'CNY', instrument_type: 'index', timezone: 'Asia/Shanghai', dailyVolatility: 0.009 }, [
    ['000001.SS', 'SSE Composite Index', 3_900, 550_000_000],
    ['000300.SS', 'CSI 300 Index', 4_600, 230_000_000, 0.01],
  ]),
  ...group({ exchange: 'STOXX', currency: 'EUR', instrument_type: 'index', timezone: 'Europe/Paris', dailyVolatility: 0.009 }, [['^STOXX50E', 'EURO STOXX 50', 5_650, 25_000_000]]),

  // More indices, one or more per market.
  ...group({ exchange: 'Nasdaq GIDS', currency: 'USD', instrument_type: 'index', timezone: NY, dailyVolatility: 0.013 }, [['^NDX', 'NASDAQ 100', 25_000, 900_000_000]]),
  ...group({ exchange: 'Chicago Options', currency: 'USD', instrument_type: 'index', timezone: 'America/Chicago', dailyVolatility: 0.015 }, [['^RUT', 'Russell 2000', 2_450, 1_200_000_000]]),
  {
    symbol: '^VIX',
    name: 'CBOE Volatility Index',
    exchange: 'Chicago Options',
    currency: 'USD',
    instrument_type: 'index',
    timezone: 'America/Chicago',
    baseLevel: 17,
    dailyVolatility: 0.06,
    dailyVolume: 0,
    decimals: 2,
    // Volatility has no long-term trend.
    annualDrift: 0,
  },
  ...group({ exchange: 'Paris', currency: 'EUR', instrument_type: 'index', timezone: 'Europe/Paris', dailyVolatility: 0.009 }, [['^FCHI', 'CAC 40', 8_100, 60_000_000]]),
  ...group({ exchange: 'Amsterdam', currency: 'EUR', instrument_type: 'index', timezone: 'Europe/Amsterdam', dailyVolatility: 0.009 }, [['^AEX', 'AEX Index', 940, 80_000_000]]),
  ...group({ exchange: 'MCE', currency: 'EUR', instrument_type: 'index', timezone: 'Europe/Madrid', dailyVolatility: 0.009 }, [['^IBEX', 'IBEX 35', 16_000, 150_000_000]]),
  ...group({ exchange: 'HKSE', currency: 'HKD', instrument_type: 'index', timezone: 'Asia/Hong_Kong', dailyVolatility: 0.014 }, [['^HSCE', 'Hang Seng China Enterprises Index', 9_200, 900_000_000]]),
  ...group({ exchange: 'Shenzhen', currency: 'CNY', instrument_type: 'index', timezone: 'Asia/Shanghai', dailyVolatility: 0.012 }, [['399001.SZ', 'Shenzhen Component', 13_000, 700_000_000]]),

  // US large caps (and the biggest Asian names' US listings).
  ...group(usStock('NasdaqGS'), [
    ['AAPL', 'Apple Inc.', 270, 50_000_000, 0.015],
    ['MSFT', 'Microsoft Corporation', 500, 22_000_000, 0.014],
    ['NVDA', 'NVIDIA Corporation', 185, 180_000_000, 0.028],
    ['AMZN', 'Amazon.com, Inc.', 230, 45_000_000, 0.019],
    ['GOOGL', 'Alphabet Inc.', 280, 35_000_000, 0.018],
    ['GOOG', 'Alphabet Inc. Class C', 281, 22_000_000, 0.018],
    ['META', 'Meta Platforms, Inc.', 640, 14_000_000, 0.022],
    ['TSLA', 'Tesla, Inc.', 420, 95_000_000, 0.035],
    ['AVGO', 'Broadcom Inc.', 350, 22_000_000, 0.026],
    ['COST', 'Costco Wholesale Corporation', 920, 2_000_000, 0.012],
    ['NFLX', 'Netflix, Inc.', 110, 30_000_000, 0.022],
    ['AMD', 'Advanced Micro Devices, Inc.', 240, 45_000_000, 0.03],
    ['INTC', 'Intel Corporation', 37, 90_000_000, 0.028],
    ['CSCO', 'Cisco Systems, Inc.', 72, 18_000_000, 0.013],
    ['ADBE', 'Adobe Inc.', 340, 3_500_000, 0.019],
    ['PEP', 'PepsiCo, Inc.', 145, 6_000_000, 0.011],
  ]),
  ...group(usStock('NYSE'), [
    ['BRK-B', 'Berkshire Hathaway Inc. Class B', 500, 4_000_000, 0.01],
    ['JPM', 'JPMorgan Chase & Co.', 305, 9_000_000, 0.015],
    ['V', 'Visa Inc.', 340, 6_500_000, 0.012],
    ['MA', 'Mastercard Incorporated', 560, 3_000_000, 0.012],
    ['UNH', 'UnitedHealth Group Incorporated', 330, 10_000_000, 0.02],
    ['XOM', 'Exxon Mobil Corporation', 115, 15_000_000, 0.014],
    ['JNJ', 'Johnson & Johnson', 195, 8_000_000, 0.01],
    ['WMT', 'Walmart Inc.', 102, 18_000_000, 0.012],
    ['PG', 'The Procter & Gamble Company', 150, 7_000_000, 0.01],
    ['HD', 'The Home Depot, Inc.', 360, 3_500_000, 0.013],
    ['KO', 'The Coca-Cola Company', 70, 14_000_000, 0.009],
    ['ORCL', 'Oracle Corporation', 220, 20_000_000, 0.028],
    ['LLY', 'Eli Lilly and Company', 1_050, 3_500_000, 0.02],
    ['BAC', 'Bank of America Corporation', 52, 35_000_000, 0.016],
    ['CRM', 'Salesforce, Inc.', 240, 7_000_000, 0.019],
    ['DIS', 'The Walt Disney Company', 112, 9_000_000, 0.015],
    ['MCD', "McDonald's Corporation", 305, 3_000_000, 0.01],
    ['NKE', 'NIKE, Inc.', 64, 12_000_000, 0.02],
    ['PFE', 'Pfizer Inc.', 25, 35_000_000, 0.014],
    ['CVX', 'Chevron Corporation', 155, 7_000_000, 0.014],
    ['IBM', 'International Business Machines Corporation', 300, 4_500_000, 0.016],
    ['TSM', 'Taiwan Semiconductor Manufacturing Company Limited', 290, 12_000_000, 0.022],
    ['BABA', 'Alibaba Group Holding Limited', 160, 15_000_000, 0.028],
  ]),

  // Exchange-traded funds.
  ...group({ exchange: 'NYSEArca', currency: 'USD', instrument_type: 'etf', timezone: NY, dailyVolatility: 0.009 }, [
    ['SPY', 'SPDR S&P 500 ETF Trust', 665, 70_000_000],
    ['IWM', 'iShares Russell 2000 ETF', 243, 35_000_000, 0.015],
    ['VTI', 'Vanguard Total Stock Market Index Fund ETF', 330, 4_000_000],
    ['VOO', 'Vanguard S&P 500 ETF', 610, 6_000_000],
    ['DIA', 'SPDR Dow Jones Industrial Average ETF Trust', 465, 3_500_000, 0.008],
    ['EEM', 'iShares MSCI Emerging Markets ETF', 54, 25_000_000, 0.011],
    ['GLD', 'SPDR Gold Shares', 375, 10_000_000, 0.012],
    ['VEA', 'Vanguard FTSE Developed Markets Index Fund ETF', 60, 10_000_000, 0.009],
    ['XLK', 'Technology Select Sector SPDR Fund', 285, 7_000_000, 0.014],
  ]),
  ...group({ exchange: 'NasdaqGM', currency: 'USD', instrument_type: 'etf', timezone: NY, dailyVolatility: 0.013 }, [
    ['QQQ', 'Invesco QQQ Trust, Series 1', 610, 45_000_000],
    ['TLT', 'iShares 20+ Year Treasury Bond ETF', 90, 35_000_000, 0.008],
  ]),

  // Germany (Xetra).
  ...group({ exchange: 'XETRA', currency: 'EUR', instrument_type: 'equity', timezone: 'Europe/Berlin', dailyVolatility: 0.016 }, [
    ['SAP.DE', 'SAP SE', 235, 1_500_000],
    ['SIE.DE', 'Siemens Aktiengesellschaft', 240, 1_300_000],
    ['BMW.DE', 'Bayerische Motoren Werke Aktiengesellschaft', 88, 1_200_000, 0.018],
    ['ALV.DE', 'Allianz SE', 350, 700_000, 0.012],
    ['DTE.DE', 'Deutsche Telekom AG', 29, 8_000_000, 0.012],
    ['MBG.DE', 'Mercedes-Benz Group AG', 58, 3_000_000, 0.018],
    ['BAS.DE', 'BASF SE', 44, 3_000_000, 0.017],
    ['VOW3.DE', 'Volkswagen AG', 98, 1_200_000, 0.019],
    ['ADS.DE', 'adidas AG', 175, 700_000, 0.02],
    ['MUV2.DE', 'Münchener Rückversicherungs-Gesellschaft AG', 540, 350_000, 0.012],
    ['DBK.DE', 'Deutsche Bank Aktiengesellschaft', 31, 9_000_000, 0.022],
    ['IFX.DE', 'Infineon Technologies AG', 36, 5_000_000, 0.025],
  ]),

  // United Kingdom (London, prices in pence).
  ...group({ exchange: 'LSE', currency: 'GBp', instrument_type: 'equity', timezone: 'Europe/London', dailyVolatility: 0.014 }, [
    ['SHEL.L', 'Shell plc', 2_750, 9_000_000],
    ['AZN.L', 'AstraZeneca PLC', 12_600, 2_000_000],
    ['HSBA.L', 'HSBC Holdings plc', 1_050, 25_000_000],
    ['ULVR.L', 'Unilever PLC', 4_600, 3_000_000, 0.011],
    ['BP.L', 'BP p.l.c.', 440, 30_000_000, 0.017],
    ['GSK.L', 'GSK plc', 1_700, 8_000_000, 0.013],
    ['RIO.L', 'Rio Tinto Group', 5_200, 3_000_000, 0.018],
    ['BARC.L', 'Barclays PLC', 400, 45_000_000, 0.019],
    ['LLOY.L', 'Lloyds Banking Group plc', 95, 150_000_000, 0.017],
    ['VOD.L', 'Vodafone Group Public Limited Company', 90, 60_000_000, 0.015],
    ['DGE.L', 'Diageo plc', 1_750, 4_000_000, 0.015],
  ]),

  // Euronext (Paris, Amsterdam, Brussels), Madrid and Milan.
  ...group({ exchange: 'Paris', currency: 'EUR', instrument_type: 'equity', timezone: 'Europe/Paris', dailyVolatility: 0.015 }, [
    ['MC.PA', 'LVMH Moët Hennessy Louis Vuitton, Société Européenne', 620, 500_000, 0.019],
    ['TTE.PA', 'TotalEnergies SE', 55, 5_000_000, 0.013],
    ['SAN.PA', 'Sanofi', 85, 2_500_000, 0.013],
    ['OR.PA', "L'Oréal S.A.", 370, 450_000],
    ['AIR.PA', 'Airbus SE', 210, 1_200_000, 0.017],
    ['BNP.PA', 'BNP Paribas SA', 75, 3_000_000, 0.017],
  ]),
  ...group({ exchange: 'Amsterdam', currency: 'EUR', instrument_type: 'equity', timezone: 'Europe/Amsterdam', dailyVolatility: 0.018 }, [
    ['ASML.AS', 'ASML Holding N.V.', 900, 800_000, 0.022],
    ['INGA.AS', 'ING Groep N.V.', 21, 10_000_000, 0.016],
    ['ADYEN.AS', 'Adyen N.V.', 1_400, 80_000, 0.028],
  ]),
  ...group({ exchange: 'Brussels', currency: 'EUR', instrument_type: 'equity', timezone: 'Europe/Brussels', dailyVolatility: 0.014 }, [
    ['ABI.BR', 'Anheuser-Busch InBev SA/NV', 52, 1_800_000],
  ]),
  ...group({ exchange: 'MCE', currency: 'EUR', instrument_type: 'equity', timezone: 'Europe/Madrid', dailyVolatility: 0.015 }, [
    ['SAN.MC', 'Banco Santander, S.A.', 9, 30_000_000, 0.018],
    ['ITX.MC', 'Industria de Diseño Textil, S.A.', 48, 3_500_000],
    ['IBE.MC', 'Iberdrola, S.A.', 17, 12_000_000, 0.011],
  ]),
  ...group({ exchange: 'Milan', currency: 'EUR', instrument_type: 'equity', timezone: 'Europe/Rome', dailyVolatility: 0.015 }, [
    ['ENEL.MI', 'Enel SpA', 8.5, 20_000_000, 0.012],
    ['ISP.MI', 'Intesa Sanpaolo S.p.A.', 5.6, 60_000_000, 0.016],
    ['RACE.MI', 'Ferrari N.V.', 390, 400_000],
  ]),

  // Japan (Tokyo).
  ...group({ exchange: 'Tokyo', currency: 'JPY', instrument_type: 'equity', timezone: 'Asia/Tokyo', dailyVolatility: 0.017, decimals: 1 }, [
    ['7203.T', 'Toyota Motor Corporation', 3_000, 25_000_000],
    ['6758.T', 'Sony Group Corporation', 4_200, 9_000_000],
    ['9984.T', 'SoftBank Group Corp.', 21_000, 12_000_000, 0.035],
    ['6861.T', 'Keyence Corporation', 56_000, 500_000],
    ['8306.T', 'Mitsubishi UFJ Financial Group, Inc.', 2_400, 40_000_000],
    ['9432.T', 'Nippon Telegraph and Telephone Corporation', 155, 120_000_000, 0.011],
    ['7974.T', 'Nintendo Co., Ltd.', 13_000, 6_000_000, 0.02],
    ['6501.T', 'Hitachi, Ltd.', 4_600, 8_000_000, 0.02],
    ['8035.T', 'Tokyo Electron Limited', 30_000, 2_500_000, 0.028],
  ]),

  // Hong Kong.
  ...group({ exchange: 'HKSE', currency: 'HKD', instrument_type: 'equity', timezone: 'Asia/Hong_Kong', dailyVolatility: 0.02 }, [
    ['0700.HK', 'Tencent Holdings Limited', 640, 18_000_000],
    ['9988.HK', 'Alibaba Group Holding Limited', 160, 60_000_000, 0.028],
    ['0005.HK', 'HSBC Holdings plc', 110, 20_000_000, 0.013],
    ['1299.HK', 'AIA Group Limited', 76, 20_000_000, 0.016],
    ['0941.HK', 'China Mobile Limited', 86, 15_000_000, 0.011],
    ['3690.HK', 'Meituan', 100, 30_000_000, 0.03],
    ['1810.HK', 'Xiaomi Corporation', 42, 150_000_000, 0.03],
    ['2318.HK', 'Ping An Insurance (Group) Company of China, Ltd.', 57, 40_000_000],
  ]),

  // Mainland China (Shanghai, Shenzhen).
  ...group({ exchange: 'Shanghai', currency: 'CNY', instrument_type: 'equity', timezone: 'Asia/Shanghai', dailyVolatility: 0.015 }, [
    ['600519.SS', 'Kweichow Moutai Co., Ltd.', 1_450, 3_000_000],
    ['601398.SS', 'Industrial and Commercial Bank of China Limited', 7.6, 300_000_000, 0.01],
    ['600036.SS', 'China Merchants Bank Co., Ltd.', 42, 60_000_000],
    ['601318.SS', 'Ping An Insurance (Group) Company of China, Ltd.', 57, 50_000_000],
  ]),
  ...group({ exchange: 'Shenzhen', currency: 'CNY', instrument_type: 'equity', timezone: 'Asia/Shanghai', dailyVolatility: 0.022 }, [
    ['300750.SZ', 'Contemporary Amperex Technology Co., Limited', 380, 30_000_000],
    ['000858.SZ', 'Wuliangye Yibin Co., Ltd.', 120, 25_000_000, 0.018],
  ]),

  // Currencies: Yahoo's FX venue reports no volume.
  ...group({ exchange: 'CCY', currency: 'USD', instrument_type: 'currency', timezone: 'Europe/London', dailyVolatility: 0.005, decimals: 4 }, [
    ['EURUSD=X', 'EUR/USD', 1.16, 0],
    ['GBPUSD=X', 'GBP/USD', 1.32, 0],
    ['AUDUSD=X', 'AUD/USD', 0.65, 0, 0.006],
    ['NZDUSD=X', 'NZD/USD', 0.57, 0, 0.006],
  ]),
  ...group({ exchange: 'CCY', currency: 'JPY', instrument_type: 'currency', timezone: 'Europe/London', dailyVolatility: 0.006, decimals: 3 }, [
    ['USDJPY=X', 'USD/JPY', 154, 0],
    ['EURJPY=X', 'EUR/JPY', 178, 0],
  ]),
  ...group({ exchange: 'CCY', currency: 'CHF', instrument_type: 'currency', timezone: 'Europe/London', dailyVolatility: 0.005, decimals: 4 }, [['USDCHF=X', 'USD/CHF', 0.8, 0]]),
  ...group({ exchange: 'CCY', currency: 'CAD', instrument_type: 'currency', timezone: 'Europe/London', dailyVolatility: 0.004, decimals: 4 }, [['USDCAD=X', 'USD/CAD', 1.4, 0]]),
  ...group({ exchange: 'CCY', currency: 'GBP', instrument_type: 'currency', timezone: 'Europe/London', dailyVolatility: 0.004, decimals: 4 }, [['EURGBP=X', 'EUR/GBP', 0.88, 0]]),
  ...group({ exchange: 'CCY', currency: 'CNY', instrument_type: 'currency', timezone: 'Europe/London', dailyVolatility: 0.003, decimals: 4 }, [['USDCNY=X', 'USD/CNY', 7.1, 0]]),

  // Cryptocurrencies (volume in USD, as Yahoo reports it).
  ...group({ exchange: 'CCC', currency: 'USD', instrument_type: 'crypto', timezone: 'UTC', dailyVolatility: 0.035 }, [
    ['BTC-USD', 'Bitcoin USD', 90_000, 45_000_000_000, 0.028],
    ['ETH-USD', 'Ethereum USD', 3_000, 25_000_000_000],
    ['SOL-USD', 'Solana USD', 140, 5_000_000_000, 0.045],
    ['BNB-USD', 'BNB USD', 900, 2_000_000_000],
  ]),
  ...group({ exchange: 'CCC', currency: 'USD', instrument_type: 'crypto', timezone: 'UTC', dailyVolatility: 0.045, decimals: 4 }, [
    ['XRP-USD', 'XRP USD', 2.1, 4_000_000_000],
    ['DOGE-USD', 'Dogecoin USD', 0.16, 1_500_000_000],
    ['ADA-USD', 'Cardano USD', 0.45, 700_000_000],
    ['TRX-USD', 'TRON USD', 0.28, 600_000_000, 0.03],
  ]),

  // Futures (CME group, quoted on New York hours here).
  ...group({ exchange: 'CME', currency: 'USD', instrument_type: 'future', timezone: NY, dailyVolatility: 0.01 }, [
    ['ES=F', 'E-Mini S&P 500 Dec 26', 6_680, 1_300_000],
    ['NQ=F', 'Nasdaq 100 Dec 26', 25_100, 500_000, 0.013],
  ]),
  ...group({ exchange: 'COMEX', currency: 'USD', instrument_type: 'future', timezone: NY, dailyVolatility: 0.013 }, [
    ['GC=F', 'Gold Dec 26', 4_100, 180_000],
    ['SI=F', 'Silver Dec 26', 50, 60_000, 0.022],
  ]),
  ...group({ exchange: 'NY Mercantile', currency: 'USD', instrument_type: 'future', timezone: NY, dailyVolatility: 0.02 }, [
    ['CL=F', 'Crude Oil Jan 27', 60, 250_000],
    ['NG=F', 'Natural Gas Jan 27', 4.3, 150_000, 0.035],
  ]),
];
