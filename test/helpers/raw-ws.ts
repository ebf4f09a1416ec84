/**
 * A WebSocket client made of a bare TCP socket, for tests that must misbehave in ways the `ws` client
 * will not: write frames as fast as the socket takes them while never reading a byte.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

/** Opcodes of RFC 6455 5.2 the tests write. */
export const OPCODE = { text: 0x1, binary: 0x2, ping: 0x9, pong: 0xa } as const;

/** One final client frame (masked, as RFC 6455 5.3 requires of clients) carrying `payload`. */
export function clientFrame(opcode: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  if (payload.length > 125) throw new Error('clientFrame: payloads up to 125 bytes');
  const mask = randomBytes(4);
  const frame = Buffer.alloc(6 + payload.length);
  frame[0] = 0x80 | opcode;
  frame[1] = 0x80 | payload.length;
  mask.copy(frame, 2);
  for (let i = 0; i < payload.length; i++) frame[6 + i] = payload[i]! ^ mask[i % 4]!;
  return frame;
}

/**
 * Opens `ws://host:port/path` by hand: resolves with the socket once the server answered 101 (the
 * bytes after the answer are left unread), or rejects with the status line of a refusal.
 */
export function rawUpgrade(url: string, headers: Record<string, string> = {}): Promise<Socket> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(target.port), target.hostname);
    let answer = '';
    const onData = (chunk: Buffer) => {
      answer += chunk.toString('latin1');
      const end = answer.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      socket.pause();
      const status = answer.slice(0, answer.indexOf('\r\n'));
      if (!/^HTTP\/1\.1 101 /.test(status)) {
        socket.destroy();
        reject(new Error(`upgrade refused: ${status}`));
        return;
      }
      resolve(socket);
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('connect', () => {
      const lines = [
        `GET ${target.pathname}${target.search} HTTP/1.1`,
        `Host: ${target.host}`,
        'Upgrade: websocket',
        'Connection: Upgrade',
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
        'Sec-WebSocket-Version: 13',
        ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
      ];
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
  });
}

/** Reads the server's (unmasked) frames from what a raw socket receives, in order. */
export class FrameReader {
  #pending: Buffer = Buffer.alloc(0);

  /** Adds received bytes; returns the frames they complete. */
  push(chunk: Buffer): Array<{ opcode: number; payload: Buffer }> {
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    const frames: Array<{ opcode: number; payload: Buffer }> = [];
    for (;;) {
      const buf = this.#pending;
      if (buf.length < 2) break;
      let length = buf[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (buf.length < 4) break;
        length = buf.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (buf.length < 10) break;
        length = Number(buf.readBigUInt64BE(2));
        offset = 10;
      }
      if (buf.length < offset + length) break;
      frames.push({ opcode: buf[0]! & 0x0f, payload: buf.subarray(offset, offset + length) });
      this.#pending = buf.subarray(offset + length);
    }
    return frames;
  }
}
