package tools

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// engram_resolve: pre-execution overlays from a local catalogue.
//
// The catalogue of a tenant is the engrams stored in it (Server.PutEngram)
// and the files of the engram directory (Env.EngramDir; the crux command
// uses DIR/engrams, or $CRUX_ENGRAM_DIR), which every tenant shares. A
// stored engram wins over a file of the same name@version: storing is the
// later, deliberate act. A file is Markdown or text, at most
// store.MaxEngramBytes, whose first lines may be a front matter between
// two "---" lines of "key: value" pairs: name, version, intent_bucket,
// min_class (fast, capable or frontier) and applicable_why; the rest is
// the content. Without a name the file's base name is the name; without a
// version it is 1. Files that do not parse are left out, and the answer
// counts them (files_skipped). The directory is read at each call, at
// most maxEngramFiles files.
//
// Manifest mode (no names) lists the catalogue without contents. Resolve
// mode returns the named engrams with their contents, where the caller's
// capability class (from model_id) reaches the engram's min_class; the
// others are listed as withheld, with the class they need.
//
// Capability class from model_id, compared word by word (split at
// anything but letters and digits, lowercased): fast for a word among
// haiku, mini, nano, flash, lite, small, tiny, instant; else frontier for
// opus, ultra, pro, max, o1, o3, o4, or gpt followed by a version of 5 or
// more; else capable, which is also the class without a model_id.
//
// Hashes: prompt_hash is "blake3:" and the hex BLAKE3-256 of the
// content's bytes; manifest_hash and engram_set_hash are the same over the
// JSON array of [ref, prompt_hash] pairs of the entries listed (resolved,
// for the set), in order.

// Limits of engram_resolve.
const (
	maxEngramFiles    = 200 // files read from the engram directory
	maxManifest       = 100 // entries a manifest lists
	engramSchema      = "crux.engram_resolve.v1"
	engramFileDefault = "1"
)

type engramResolveArgs struct {
	Names        []string `json:"names,omitempty" schema:"items.maxLength=257;items.minLength=3;maxItems=20"`
	ModelID      string   `json:"model_id,omitempty" schema:"maxLength=256"`
	IntentBucket string   `json:"intent_bucket,omitempty" schema:"maxLength=1024"`
	TenantID     string   `json:"tenant_id,omitempty" schema:"minLength=1"`
}

// ManifestEntry is one engram of a manifest, its content left out.
type ManifestEntry struct {
	Ref           string `json:"ref"`
	Name          string `json:"name"`
	Version       string `json:"version"`
	IntentBucket  string `json:"intent_bucket,omitempty"`
	PromptHash    string `json:"prompt_hash"`
	MinClass      string `json:"min_class"`
	ApplicableWhy string `json:"applicable_why,omitempty"`
	Source        string `json:"source"` // store or file
}

// ResolvedEngram is an engram engram_resolve returns with its content.
type ResolvedEngram struct {
	Name          string `json:"name"`
	Version       string `json:"version"`
	IntentBucket  string `json:"intent_bucket,omitempty"`
	Content       string `json:"content"`
	PromptHash    string `json:"prompt_hash"`
	ApplicableWhy string `json:"applicable_why,omitempty"`
}

// WithheldEngram is an engram the caller's model class may not read.
type WithheldEngram struct {
	Ref      string `json:"ref"`
	MinClass string `json:"min_class"`
	Reason   string `json:"reason"`
}

// EngramManifestOutput is what engram_resolve returns without names: the
// manifest.
type EngramManifestOutput struct {
	Schema          string          `json:"schema"`
	CapabilityClass string          `json:"capability_class"`
	EngramManifest  []ManifestEntry `json:"engram_manifest"`
	Count           int             `json:"count"`     // entries that match, listed or not
	Truncated       bool            `json:"truncated"` // the manifest lists fewer than Count
	ManifestHash    string          `json:"manifest_hash"`
	FilesSkipped    int             `json:"files_skipped,omitempty"`
}

// EngramResolveOutput is what engram_resolve returns for names.
type EngramResolveOutput struct {
	Schema          string           `json:"schema"`
	CapabilityClass string           `json:"capability_class"`
	Engrams         []ResolvedEngram `json:"engrams"`
	Withheld        []WithheldEngram `json:"withheld"`
	Missing         []string         `json:"missing"`
	EngramSetHash   string           `json:"engram_set_hash"`
	ManifestHash    string           `json:"manifest_hash"`
}

func (d *Deps) engramResolve() *toolkit.Tool {
	const name = "engram_resolve"
	return &toolkit.Tool{
		Name:        name,
		Description: "Instructions to apply before acting. No names: the manifest; name@version: what your model class may read. Flag ENGRAM_MCP.",
		Annotations: toolkit.Annotations{Title: "Resolve engrams", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[EngramResolveOutput](),
		Alt:         toolkit.OutputOf[EngramManifestOutput](),
		Gate:        memFlagGate(toolkit.CodeCapabilityDenied, name, feature.EnvEngramMCP, func(f *feature.Flags) bool { return f.EngramMCP }),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *engramResolveArgs) (*toolkit.Result, error) {
			tenant := in.TenantID
			if tenant == "" {
				tenant = c.TenantID()
			}
			if err := tenantFor(name, c, tenant); err != nil {
				return nil, err
			}
			refs := make([][2]string, len(in.Names))
			for i, ref := range in.Names {
				n, v, ok := store.ParseEngramRef(ref)
				if !ok {
					return nil, toolkit.InvalidParams(name, fmt.Sprintf("names[%d]", i), fmt.Sprintf("%q is not name@version", ref))
				}
				refs[i] = [2]string{n, v}
			}
			cat, skipped, err := d.engramCatalogue(ctx, env, tenant)
			if err != nil {
				return nil, err
			}
			class := capabilityClass(in.ModelID)
			var listed []ManifestEntry
			for _, e := range cat {
				if in.IntentBucket == "" || e.IntentBucket == in.IntentBucket {
					listed = append(listed, e.toManifestEntry())
				}
			}
			if len(refs) == 0 {
				out := EngramManifestOutput{Schema: engramSchema, CapabilityClass: class, EngramManifest: []ManifestEntry{},
					Count: len(listed), FilesSkipped: skipped}
				if len(listed) > maxManifest {
					listed, out.Truncated = listed[:maxManifest], true
				}
				out.EngramManifest = append(out.EngramManifest, listed...)
				out.ManifestHash = manifestHash(listed)
				return toolkit.JSONResult(out)
			}
			out := EngramResolveOutput{Schema: engramSchema, CapabilityClass: class, Engrams: []ResolvedEngram{},
				Withheld: []WithheldEngram{}, Missing: []string{}, ManifestHash: manifestHash(listed)}
			var set []ManifestEntry
			for i, r := range refs {
				e := findEngram(cat, r[0], r[1])
				switch {
				case e == nil || in.IntentBucket != "" && e.IntentBucket != in.IntentBucket:
					out.Missing = append(out.Missing, in.Names[i])
				case store.ClassRank(class) < store.ClassRank(e.minClass()):
					out.Withheld = append(out.Withheld, WithheldEngram{Ref: e.Ref(), MinClass: e.minClass(),
						Reason: fmt.Sprintf("needs a %s model or above; model_id %q is %s", e.minClass(), in.ModelID, class)})
				default:
					m := e.toManifestEntry()
					out.Engrams = append(out.Engrams, ResolvedEngram{Name: e.Name, Version: e.Version, IntentBucket: e.IntentBucket,
						Content: e.Content, PromptHash: m.PromptHash, ApplicableWhy: e.ApplicableWhy})
					set = append(set, m)
				}
			}
			out.EngramSetHash = manifestHash(set)
			return toolkit.JSONResult(out)
		}),
	}
}

// catalogued is an engram of the catalogue and where it came from.
type catalogued struct {
	store.Engram
	source string
}

func (e *catalogued) minClass() string {
	if e.MinClass == "" {
		return store.ClassFast
	}
	return e.MinClass
}

func (e *catalogued) toManifestEntry() ManifestEntry {
	sum := blake3.Sum256([]byte(e.Content))
	return ManifestEntry{Ref: e.Ref(), Name: e.Name, Version: e.Version, IntentBucket: e.IntentBucket,
		PromptHash: "blake3:" + hex.EncodeToString(sum[:]), MinClass: e.minClass(), ApplicableWhy: e.ApplicableWhy, Source: e.source}
}

func findEngram(cat []catalogued, name, version string) *catalogued {
	for i := range cat {
		if cat[i].Name == name && cat[i].Version == version {
			return &cat[i]
		}
	}
	return nil
}

// manifestHash is the hash of a list of entries (see the notes above).
func manifestHash(list []ManifestEntry) string {
	pairs := make([][2]string, len(list))
	for i, e := range list {
		pairs[i] = [2]string{e.Ref, e.PromptHash}
	}
	b, _ := json.Marshal(pairs)
	sum := blake3.Sum256(b)
	return "blake3:" + hex.EncodeToString(sum[:])
}

// engramCatalogue returns tenant's catalogue sorted by name and version:
// its stored engrams and the directory's files they do not replace, and
// how many files it could not read.
func (d *Deps) engramCatalogue(ctx context.Context, env *toolkit.Env, tenant string) ([]catalogued, int, error) {
	var cat []catalogued
	err := env.Store.View(ctx, func(tx store.Tx) error {
		cat = cat[:0]
		return store.Engrams(tx, tenant, func(e *store.Engram) error {
			cat = append(cat, catalogued{Engram: *e, source: "store"})
			return nil
		})
	})
	if err != nil {
		return nil, 0, err
	}
	files, skipped := engramFiles(d.EngramDir)
	for _, f := range files {
		if findEngram(cat, f.Name, f.Version) == nil {
			cat = append(cat, catalogued{Engram: f, source: "file"})
		}
	}
	slices.SortFunc(cat, func(a, b catalogued) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
	return cat, skipped, nil
}

// engramFiles reads the engram files of dir ("" or a missing directory:
// none), at most maxEngramFiles in name order, and counts those it skips.
func engramFiles(dir string) ([]store.Engram, int) {
	if dir == "" {
		return nil, 0
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0
	}
	var out []store.Engram
	skipped := 0
	for _, de := range entries {
		ext := strings.ToLower(filepath.Ext(de.Name()))
		if !de.Type().IsRegular() || strings.HasPrefix(de.Name(), ".") || (ext != ".md" && ext != ".txt") {
			continue
		}
		if len(out)+skipped >= maxEngramFiles {
			skipped++
			continue
		}
		e, err := readEngramFile(filepath.Join(dir, de.Name()))
		if err != nil {
			skipped++
			continue
		}
		if slices.ContainsFunc(out, func(o store.Engram) bool { return o.Ref() == e.Ref() }) {
			skipped++ // two files of one name@version: the first in name order wins
			continue
		}
		out = append(out, e)
	}
	return out, skipped
}

// readEngramFile parses one engram file (see the notes above).
func readEngramFile(path string) (store.Engram, error) {
	var e store.Engram
	fi, err := os.Stat(path)
	if err != nil {
		return e, err
	}
	if fi.Size() > store.MaxEngramBytes+4096 {
		return e, fmt.Errorf("%s: larger than %d bytes", path, store.MaxEngramBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return e, err
	}
	text := string(b)
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	e.Name, e.Version = base, engramFileDefault
	if rest, ok := strings.CutPrefix(text, "---\n"); ok {
		head, body, ok := strings.Cut(rest, "\n---\n")
		if !ok {
			return e, fmt.Errorf("%s: front matter without its closing ---", path)
		}
		sc := bufio.NewScanner(strings.NewReader(head))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return e, fmt.Errorf("%s: front matter line %q is not key: value", path, line)
			}
			v = strings.Trim(strings.TrimSpace(v), `"'`)
			switch strings.TrimSpace(k) {
			case "name":
				e.Name = v
			case "version":
				e.Version = v
			case "intent_bucket":
				e.IntentBucket = v
			case "min_class":
				e.MinClass = v
			case "applicable_why":
				e.ApplicableWhy = v
			default:
				return e, fmt.Errorf("%s: unknown front matter key %q", path, k)
			}
		}
		text = body
	}
	e.Content = strings.TrimSpace(text)
	return e, store.CheckEngram(&e)
}

// capabilityClass is the class of a model id (see the notes above).
func capabilityClass(modelID string) string {
	words := strings.FieldsFunc(strings.ToLower(modelID), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	has := func(set ...string) bool {
		return slices.ContainsFunc(words, func(w string) bool { return slices.Contains(set, w) })
	}
	if has("haiku", "mini", "nano", "flash", "lite", "small", "tiny", "instant") {
		return store.ClassFast
	}
	if has("opus", "ultra", "pro", "max", "o1", "o3", "o4") {
		return store.ClassFrontier
	}
	for i, w := range words {
		if w == "gpt" && i+1 < len(words) {
			if v, err := strconv.Atoi(words[i+1]); err == nil && v >= 5 {
				return store.ClassFrontier
			}
		}
		if v, ok := strings.CutPrefix(w, "gpt"); ok && v != "" {
			if n, err := strconv.Atoi(v); err == nil && n >= 5 {
				return store.ClassFrontier
			}
		}
	}
	return store.ClassCapable
}

// PutEngram stores e in tenant's catalogue, replacing the engram of the
// same name@version, in one transaction; an engram that cannot be stored
// is an error naming what is wrong.
func PutEngram(ctx context.Context, env *toolkit.Env, tenant string, e store.Engram) error {
	if err := checkTenantName(tenant); err != nil {
		return err
	}
	if err := store.CheckEngram(&e); err != nil {
		return err
	}
	now := env.Time()
	return env.Store.Update(ctx, func(tx store.Tx) error { return store.PutEngram(tx, tenant, e, now) })
}

// DeleteEngram removes ref (name@version) from tenant's stored engrams,
// reporting whether it was there. Files are not touched.
func DeleteEngram(ctx context.Context, env *toolkit.Env, tenant, ref string) (bool, error) {
	name, version, ok := store.ParseEngramRef(ref)
	if !ok {
		return false, fmt.Errorf("crux: %q is not name@version", ref)
	}
	var gone bool
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		gone, err = store.DeleteEngram(tx, tenant, name, version)
		return err
	})
	return gone, err
}
