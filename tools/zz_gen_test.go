package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestZZGen(t *testing.T) {
	var out bytes.Buffer
	for _, tl := range All(nil) {
		var doc map[string]any
		d := json.NewDecoder(bytes.NewReader(tl.Schema))
		d.UseNumber()
		d.Decode(&doc)
		typ := tl.ArgumentType()
		gen(&out, tl.Name, typ.Name(), "", doc, typ)
	}
	os.WriteFile("/tmp/tags.tsv", out.Bytes(), 0o644)
}

func lit(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return string(v)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func gen(out *bytes.Buffer, tool, owner, path string, doc map[string]any, typ reflect.Type) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	req := map[string]bool{}
	if r, ok := doc["required"].([]any); ok {
		for _, x := range r {
			req[x.(string)] = true
		}
	}
	props, _ := doc["properties"].(map[string]any)
	var walk func(typ reflect.Type, owner, path string)
	walk = func(typ reflect.Type, owner, path string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				walk(f.Type, f.Type.Name(), "")
				continue
			}
			if name == "" {
				name = f.Name
			}
			p, ok := props[name].(map[string]any)
			if !ok {
				fmt.Fprintf(out, "ERR\t%s\tno prop %s\n", tool, name)
				continue
			}
			omit := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
			var parts []string
			if !req[name] && !omit {
				parts = append(parts, "optional")
			}
			if req[name] && omit {
				fmt.Fprintf(out, "ERR\t%s\trequired omitempty %s\n", tool, name)
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			raw := ft == reflect.TypeFor[json.RawMessage]() || ft.Kind() == reflect.Interface
			var keys []string
			for k := range p {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			docTag, patTag := "", ""
			for _, k := range keys {
				v := p[k]
				switch k {
				case "type":
					if raw {
						parts = append(parts, "type="+lit(v))
					}
				case "description":
					docTag = v.(string)
				case "pattern":
					patTag = v.(string)
				case "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems", "default":
					parts = append(parts, k+"="+lit(v))
				case "enum":
					var es []string
					for _, e := range v.([]any) {
						es = append(es, e.(string))
					}
					parts = append(parts, "enum="+strings.Join(es, "|"))
				case "items":
					it := v.(map[string]any)
					if it["type"] == "object" {
						gen(out, tool, ft.Elem().Name(), path+name+"[].", it, ft.Elem())
						continue
					}
					var iks []string
					for ik := range it {
						iks = append(iks, ik)
					}
					sort.Strings(iks)
					for _, ik := range iks {
						switch ik {
						case "type":
						case "enum":
							var es []string
							for _, e := range it[ik].([]any) {
								es = append(es, e.(string))
							}
							parts = append(parts, "items.enum="+strings.Join(es, "|"))
						default:
							parts = append(parts, "items."+ik+"="+lit(it[ik]))
						}
					}
				case "properties", "required", "additionalProperties":
					if k == "properties" && !raw {
						gen(out, tool, ft.Name(), path+name+".", p, ft)
					}
				default:
					fmt.Fprintf(out, "ERR\t%s\tkeyword %s on %s\n", tool, k, name)
				}
			}
			fmt.Fprintf(out, "TAG\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tool, owner, path, name, strings.Join(parts, ";"), docTag, patTag)
		}
	}
	walk(typ, owner, path)
}
