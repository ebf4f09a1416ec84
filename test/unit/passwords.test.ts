import bcrypt from 'bcryptjs';
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../src/domain/errors.js';
import { assertAcceptablePassword, PasswordHasher } from '../../src/infra/auth/passwords.js';

function violationOf(password: string, path?: string): InvalidRequestError {
  try {
    assertAcceptablePassword(password, path);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidRequestError);
    return err as InvalidRequestError;
  }
  throw new Error('expected the password to be refused');
}

describe('assertAcceptablePassword', () => {
  it('when the password is 73 bytes of multibyte characters, then refuses it naming the byte count', () => {
    const password = `${'é'.repeat(36)}a`;
    expect(password).toHaveLength(37);

    const err = violationOf(password, 'body.new_password');

    expect(err.violations).toEqual([{ path: 'body.new_password', message: 'must be at most 72 bytes in UTF-8 (got 73)' }]);
  });

  it("when the password is 'é'.repeat(37) (37 characters, 74 bytes), then refuses it", () => {
    expect(violationOf('é'.repeat(37)).violations[0]?.message).toContain('got 74');
  });

  it('when the password is exactly 72 bytes, then accepts it', () => {
    expect(() => assertAcceptablePassword('é'.repeat(36))).not.toThrow();
    expect(() => assertAcceptablePassword('x'.repeat(72))).not.toThrow();
  });

  it('when the password is shorter than 8 bytes, then refuses it; 8 bytes pass', () => {
    expect(violationOf('1234567').violations).toEqual([{ path: 'body.password', message: 'must be at least 8 bytes long (got 7)' }]);
    expect(() => assertAcceptablePassword('12345678')).not.toThrow();
    // Four 2-byte characters are 8 bytes.
    expect(() => assertAcceptablePassword('éééé')).not.toThrow();
  });
});

describe('PasswordHasher', () => {
  const hasher = new PasswordHasher({ rounds: 4 });

  it('hash: when hashing, then produces a bcrypt hash at the configured cost that verifies', async () => {
    const hash = await hasher.hash('correct horse');

    expect(bcrypt.getRounds(hash)).toBe(4);
    expect(await hasher.verify('correct horse', hash)).toBe(true);
  });

  it('verify: when the password is wrong, then false', async () => {
    const hash = await hasher.hash('correct horse');

    expect(await hasher.verify('correct horsE', hash)).toBe(false);
  });

  it('verify: when a password longer than 72 bytes shares its first 72 bytes with the real one, then false', async () => {
    const real = 'é'.repeat(36);
    const hash = await hasher.hash(real);

    // bcrypt alone would say true: it never looks past byte 72.
    expect(await bcrypt.compare(`${real}!`, hash)).toBe(true);
    expect(await hasher.verify(`${real}!`, hash)).toBe(false);
  });

  it('verifyUnknownUser: when called, then resolves false after a comparison against a dummy hash of the same cost', async () => {
    expect(await hasher.verifyUnknownUser('anything at all')).toBe(false);

    const dummy = await hasher.dummyHash();
    expect(bcrypt.getRounds(dummy)).toBe(hasher.rounds);
    expect(await hasher.dummyHash()).toBe(dummy);
    expect(bcrypt.getRounds(await new PasswordHasher({ rounds: 5 }).dummyHash())).toBe(5);
  });

  it('constructor: when rounds are outside 4..31, then refuses to build', () => {
    expect(() => new PasswordHasher({ rounds: 3 })).toThrow(RangeError);
    expect(() => new PasswordHasher({ rounds: 32 })).toThrow(RangeError);
    expect(() => new PasswordHasher({ rounds: 4.5 })).toThrow(RangeError);
  });
});
