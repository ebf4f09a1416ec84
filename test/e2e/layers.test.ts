import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..', '..');

/** Runs `npm run lint:layers` in `dir`; its exit code and what it printed. */
async function lintLayers(dir: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run('npm', ['run', '--silent', 'lint:layers'], { cwd: dir });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? 1, output: (e.stdout ?? '') + (e.stderr ?? '') };
  }
}

describe('lint: the layer rules of src/', () => {
  let copy: string;

  beforeAll(() => {
    copy = mkdtempSync(join(tmpdir(), 'mds-layers-'));
    for (const name of ['src', 'package.json', 'tsconfig.json', '.dependency-cruiser.cjs']) cpSync(join(ROOT, name), join(copy, name), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  });

  afterAll(() => rmSync(copy, { recursive: true, force: true }));

  const plant = (file: string, text: string) => {
    writeFileSync(join(copy, file), text);
    return () => rmSync(join(copy, file));
  };

  it('when src/ is as committed, then it passes', async () => {
    const { code, output } = await lintLayers(copy);
    expect(output).toContain('no dependency violations found');
    expect(code).toBe(0);
  });

  it('when a domain module imports an adapter, then it fails naming the rule', async () => {
    const remove = plant('src/domain/planted.ts', "import { createLogger } from '../infra/logger.js';\nexport const planted = createLogger;\n");
    const { code, output } = await lintLayers(copy);
    remove();
    expect(code).not.toBe(0);
    expect(output).toContain('domain-is-pure');
    expect(output).toContain('src/domain/planted.ts');
  });

  it('when a service imports http code, then it fails naming the rule', async () => {
    const remove = plant('src/services/planted.ts', "import { createApp } from '../http/app.js';\nexport const planted = createApp;\n");
    const { code, output } = await lintLayers(copy);
    remove();
    expect(code).not.toBe(0);
    expect(output).toContain('services-know-no-adapters');
  });

  it('when http code imports an adapter, then it fails naming the rule', async () => {
    const remove = plant('src/http/planted.ts', "import { createLogger } from '../infra/logger.js';\nexport const planted = createLogger;\n");
    const { code, output } = await lintLayers(copy);
    remove();
    expect(code).not.toBe(0);
    expect(output).toContain('http-knows-no-adapters');
  });

  it("when a module other than the validator's adapter reaches into the validator's internals, then it fails naming the rule", async () => {
    const remove = plant('src/http/planted.ts', "import type { OpenApiRequestMetadata } from 'express-openapi-validator/dist/framework/types.js';\nexport type Planted = OpenApiRequestMetadata;\n");
    const { code, output } = await lintLayers(copy);
    remove();
    expect(code).not.toBe(0);
    expect(output).toContain('framework-internals-in-one-adapter');
    expect(output).toContain('src/http/planted.ts');
  });

  it('when two modules import each other, then it fails as a cycle', async () => {
    const removeA = plant('src/domain/planted-a.ts', "import { b } from './planted-b.js';\nexport const a = () => b;\n");
    const removeB = plant('src/domain/planted-b.ts', "import { a } from './planted-a.js';\nexport const b = () => a;\n");
    const { code, output } = await lintLayers(copy);
    removeA();
    removeB();
    expect(code).not.toBe(0);
    expect(output).toContain('no-cycle');
  });

  it('when a module is left at the top of src/, then it fails', async () => {
    const remove = plant('src/loose.ts', "import { AppError } from './domain/errors.js';\nexport const loose = AppError;\n");
    const { code, output } = await lintLayers(copy);
    remove();
    expect(code).not.toBe(0);
    expect(output).toContain('only-main-and-config-at-the-top');
  });
});
