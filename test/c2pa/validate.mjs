// validate.mjs runs two independent C2PA implementations over sidecar
// manifests and their assets, offline, and prints what each reports as
// JSON. validate_test.go makes the manifests with crux's output_attest and
// judges the answers.
//
//   node validate.mjs CASES.json
//
// CASES.json: {"root_pem": FILE, "cases": [{"name", "manifest": FILE,
// "asset": FILE, "mime"}]}. For each case:
//
//   - ts: @trustnxt/c2pa-ts validates the manifest store against the asset
//     bytes (through its Asset interface; a sidecar's asset holds no
//     embedded manifest) and gives isValid and its status codes.
//   - rs: c2pa-rs (@contentauth/c2pa-wasm) reads the store as
//     application/c2pa, without and with the root as trust anchor. Its
//     WebAssembly build has no sidecar-plus-asset entry point, so it hashes
//     the .c2pa bytes themselves for c2pa.hash.data (always
//     assertion.dataHash.mismatch); rs.binding recomputes the data hash
//     c2pa-rs parsed (under a claim signature it validated) over the real
//     asset.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import init, { WasmReader } from '@contentauth/c2pa-wasm';
import { SuperBox } from '@trustnxt/c2pa-ts/jumbf';
import { ManifestStore } from '@trustnxt/c2pa-ts/manifest';

const here = path.dirname(fileURLToPath(import.meta.url));

// Sidecar is a c2pa-ts Asset over raw bytes whose manifest store lives
// beside them: the whole asset is hashed, nothing is excluded.
class Sidecar {
  constructor(data, jumbf, mimeType) {
    this.data = data;
    this.jumbf = jumbf;
    this.mimeType = mimeType;
  }
  getDataLength() { return this.data.length; }
  async getDataRange(start = 0, length = this.data.length - start) { return this.data.subarray(start, start + length); }
  getManifestJUMBF() { return this.jumbf; }
  dumpInfo() { return `sidecar asset of ${this.data.length} bytes`; }
  async ensureManifestSpace() { throw new Error('a sidecar asset is read only'); }
  getHashExclusionRange() { return { start: 0, length: 0 }; }
  async writeManifestJUMBF() { throw new Error('a sidecar asset is read only'); }
}

function codes(entries, success) {
  return entries.filter((e) => e.success === success).map((e) => e.code);
}

async function viaTS(jumbf, asset, mime) {
  try {
    const store = ManifestStore.read(SuperBox.fromBuffer(jumbf));
    const vr = await store.validate(new Sidecar(asset, jumbf, mime));
    return { valid: vr.isValid, success: codes(vr.statusEntries, true), failure: codes(vr.statusEntries, false) };
  } catch (e) {
    return { error: String(e && e.message ? e.message : e) };
  }
}

function b64field(v) {
  const m = /^b64'(.*)'$/.exec(v ?? '');
  return m ? Buffer.from(m[1], 'base64') : null;
}

async function viaRS(jumbf, asset, rootPem) {
  const out = {};
  for (const [name, ctx] of [
    ['untrusted', undefined],
    ['trusted', JSON.stringify({ trust: { trust_anchors: rootPem }, verify: { verify_trust: true } })],
  ]) {
    try {
      const r = await WasmReader.fromBytes('application/c2pa', jumbf, ctx);
      const j = JSON.parse(r.json());
      const res = j.validation_results?.activeManifest ?? {};
      out[name] = {
        state: j.validation_state,
        success: (res.success ?? []).map((e) => e.code),
        failure: (res.failure ?? []).map((e) => e.code),
        informational: (res.informational ?? []).map((e) => e.code),
      };
      if (name === 'trusted') {
        const cr = JSON.parse(r.crJson());
        const active = cr.manifests?.find((m) => m.label === r.activeLabel()) ?? cr.manifests?.at(-1);
        const dh = active?.assertions?.['c2pa.hash.data'];
        const want = b64field(dh?.hash);
        const alg = dh?.alg ?? 'sha256';
        const got = crypto.createHash(alg).update(asset).digest();
        out.binding = {
          alg,
          exclusions: dh?.exclusions?.length ?? null,
          manifest_hash_hex: want ? want.toString('hex') : null,
          asset_hash_hex: got.toString('hex'),
          match: want !== null && want.equals(got),
          digital_source_type: active?.assertions?.['c2pa.actions.v2']?.actions?.[0]?.digitalSourceType ?? null,
          signature_algorithm: active?.signature?.algorithm ?? null,
        };
      }
      r.free();
    } catch (e) {
      out[name] = { error: String(e && e.message ? e.message : e) };
    }
  }
  return out;
}

const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
await init({ module_or_path: fs.readFileSync(path.join(here, 'node_modules/@contentauth/c2pa-wasm/pkg/c2pa_bg.wasm')) });
const rootPem = fs.readFileSync(spec.root_pem, 'utf8');
const results = {};
for (const c of spec.cases) {
  const jumbf = new Uint8Array(fs.readFileSync(c.manifest));
  const asset = new Uint8Array(fs.readFileSync(c.asset));
  results[c.name] = { ts: await viaTS(jumbf, asset, c.mime), rs: await viaRS(jumbf, asset, rootPem) };
}
process.stdout.write(JSON.stringify({ node: process.version, cases: results }) + '\n');
