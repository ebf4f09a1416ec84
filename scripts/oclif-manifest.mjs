/**
 * Writes `oclif.manifest.json` from the built commands (`dist/commands`), as the last step of
 * `npm run build`. With the manifest, oclif reads each command's flags and description from one file
 * instead of importing all sixteen command modules on every run, so `mds <command>` loads only the
 * module of the command run. It is a build output (ignored by git, shipped with `dist/`): a build
 * always rewrites it, so it cannot describe other commands than the ones built.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Plugin } from '@oclif/core';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// `ignoreManifest`: read the commands themselves, never a manifest left by an earlier build.
const plugin = new Plugin({ root, type: 'core', ignoreManifest: true, errorOnManifestCreate: true });
await plugin.load();
const count = Object.keys(plugin.manifest.commands).length;
if (count === 0) throw new Error('oclif-manifest: no command found under dist/commands (run tsc first)');
writeFileSync(join(root, 'oclif.manifest.json'), `${JSON.stringify(plugin.manifest)}\n`);
