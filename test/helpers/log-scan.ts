/**
 * Finds credentials in log text: the secrets the tests noted, and anything shaped like a bcrypt hash,
 * a JWT or a managed API key, whoever's it is.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LOG_SUFFIX, SECRETS_SUFFIX } from './log-files.js';

/** Credential shapes no log line may contain. */
export const CREDENTIAL_PATTERNS: ReadonlyArray<{ kind: string; pattern: RegExp }> = [
  { kind: 'bcrypt hash', pattern: /\$2[aby]\$\d{2}\$[./A-Za-z0-9]{53}/ },
  { kind: 'JWT', pattern: /eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}/ },
  { kind: 'managed API key', pattern: /mds_[A-Za-z0-9_-]{43}/ },
];

export interface Finding {
  file: string;
  line: number;
  kind: string;
  /** The line, with the credential itself cut out so the report does not leak it again. */
  excerpt: string;
}

/** Every credential found in `text`: one finding per line and kind. */
export function scanText(text: string, secrets: readonly string[], file = '<text>'): Finding[] {
  const findings: Finding[] = [];
  text.split('\n').forEach((content, index) => {
    for (const { kind, pattern } of CREDENTIAL_PATTERNS) {
      if (pattern.test(content)) findings.push({ file, line: index + 1, kind, excerpt: content.replace(new RegExp(pattern.source, 'g'), `<${kind}>`).slice(0, 200) });
    }
    for (const secret of secrets) {
      if (content.includes(secret)) findings.push({ file, line: index + 1, kind: 'noted secret', excerpt: content.split(secret).join('<secret>').slice(0, 200) });
    }
  });
  return findings;
}

/** The log files and noted secrets of a run's log directory. */
export function readRunLogs(dir: string): { files: Array<{ name: string; text: string }>; secrets: string[] } {
  if (!existsSync(dir)) return { files: [], secrets: [] };
  const names = readdirSync(dir);
  const secrets = new Set<string>();
  for (const name of names.filter((n) => n.endsWith(SECRETS_SUFFIX))) {
    for (const secret of readFileSync(join(dir, name), 'utf8').split('\n')) if (secret) secrets.add(secret);
  }
  const files = names.filter((n) => n.endsWith(LOG_SUFFIX)).map((name) => ({ name, text: readFileSync(join(dir, name), 'utf8') }));
  return { files, secrets: [...secrets] };
}

/** Scans every log file of `dir` for every noted secret and credential shape. */
export function scanRunLogs(dir: string): { findings: Finding[]; files: number; lines: number; secrets: number } {
  const { files, secrets } = readRunLogs(dir);
  const findings = files.flatMap((f) => scanText(f.text, secrets, f.name));
  const lines = files.reduce((n, f) => n + f.text.split('\n').filter(Boolean).length, 0);
  return { findings, files: files.length, lines, secrets: secrets.length };
}
