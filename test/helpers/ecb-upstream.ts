/**
 * The ECB's reference-rate files on 127.0.0.1: the recorded slice of its historical CSV served as ECB
 * serves it (`eurofxref-hist.zip`, one deflated entry), the recorded daily file and the 90-day file.
 */
import { crc32, deflateRawSync } from 'node:zlib';
import { fixture, startReplayUpstream, type ReplayUpstream } from './replay-upstream.js';

export const ECB_HISTORY_CSV = 'ecb-eurofxref-hist-2024-03-28-to-2024-07-05.csv';

/** A zip archive holding `data` as its one file `name`, deflated. */
export function zipOf(name: string, data: Buffer): Buffer {
  const nameBytes = Buffer.from(name, 'utf8');
  const compressed = deflateRawSync(data);
  const crc = crc32(data);
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt16LE(0, 6);
  local.writeUInt16LE(8, 8);
  local.writeUInt32LE(crc, 14);
  local.writeUInt32LE(compressed.length, 18);
  local.writeUInt32LE(data.length, 22);
  local.writeUInt16LE(nameBytes.length, 26);
  const central = Buffer.alloc(46);
  central.writeUInt32LE(0x02014b50, 0);
  central.writeUInt16LE(20, 4);
  central.writeUInt16LE(20, 6);
  central.writeUInt16LE(8, 10);
  central.writeUInt32LE(crc, 16);
  central.writeUInt32LE(compressed.length, 20);
  central.writeUInt32LE(data.length, 24);
  central.writeUInt16LE(nameBytes.length, 28);
  central.writeUInt32LE(0, 42);
  const centralAt = local.length + nameBytes.length + compressed.length;
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(1, 8);
  end.writeUInt16LE(1, 10);
  end.writeUInt32LE(central.length + nameBytes.length, 12);
  end.writeUInt32LE(centralAt, 16);
  return Buffer.concat([local, nameBytes, compressed, central, nameBytes, end]);
}

/** A replay server answering ECB's three files from the recordings (the historical CSV may be given instead). */
export function startEcbUpstream(historyCsv: Buffer = fixture(ECB_HISTORY_CSV)): Promise<ReplayUpstream> {
  return startReplayUpstream({
    routes: [
      { path: '/stats/eurofxref/eurofxref-hist.zip', status: 200, contentType: 'application/zip', body: zipOf('eurofxref-hist.csv', historyCsv) },
      { path: '/stats/eurofxref/eurofxref-daily.xml', status: 200, contentType: 'text/xml', body: fixture('ecb-eurofxref-daily-2024-06-26.xml') },
      { path: '/stats/eurofxref/eurofxref-hist-90d.xml', status: 200, contentType: 'text/xml', body: fixture('ecb-eurofxref-hist-90d-synthetic.xml') },
    ],
  });
}
