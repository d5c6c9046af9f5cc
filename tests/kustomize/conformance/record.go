// Records every build kustomize's own krusty tests run, as a conformance case for this
// project's kustomize engine. tests/kustomize/extract-conformance.sh copies this file into the
// krusty package of the sigs.k8s.io/kustomize/api module and renames kustomize's
// Kustomizer.Run to runUnrecorded; the Run below wraps it. With KC_CONFORMANCE_OUT unset it
// records nothing.
//
// A case is what kustomize itself produced from that input, whatever the test then asserted:
// the in-memory file tree, the directory built, and either the YAML output or the error.
// Builds whose options this project's `build` command cannot express (plugins, helm, legacy
// reordering, the managed-by label), builds on the real disk, and builds that reach the
// network are not recorded.

package krusty

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// conformanceTestName is the running test's name (subtests included), set by the test
// harness around each of its builds; empty outside them.
var conformanceTestName string

// SetConformanceTestName is called by the patched test harness before and after a build.
func SetConformanceTestName(name string) { conformanceTestName = name }

var (
	conformanceMu   sync.Mutex
	conformanceRuns = map[string]int{}
	unusualChars    = regexp.MustCompile(`[^A-Za-z0-9_.-]`)
	underscores     = regexp.MustCompile(`_+`)
	// Test files whose builds depend on a network this machine may not have.
	networkSources = map[string]bool{"remoteloader_test.go": true}
)

// Run builds as kustomize's Run does, recording the build as a conformance case.
func (b *Kustomizer) Run(fSys filesys.FileSystem, path string) (resmap.ResMap, error) {
	out := os.Getenv("KC_CONFORMANCE_OUT")
	if out == "" || !recordable(b.options, fSys) {
		return b.runUnrecorded(fSys, path)
	}
	files, err := snapshot(fSys)
	if err != nil {
		return b.runUnrecorded(fSys, path)
	}
	m, buildErr := b.runUnrecorded(fSys, path)
	test, source := callingTest()
	if test == "" || networkSources[source] {
		return m, buildErr
	}
	if err := writeCase(out, test, source, b.options, files, path, m, buildErr); err != nil {
		fmt.Fprintf(os.Stderr, "conformance recorder: %s: %v\n", test, err)
	}
	return m, buildErr
}

// recordable: an in-memory file system and options the `build` command can express.
func recordable(o *Options, fSys filesys.FileSystem) bool {
	if fmt.Sprintf("%T", fSys) != "*filesys.fsNode" {
		return false
	}
	pc := o.PluginConfig
	return o.Reorder == ReorderOptionNone && !o.AddManagedbyLabel && pc != nil &&
		pc.PluginRestrictions == types.PluginRestrictionsBuiltinsOnly &&
		pc.BpLoadingOptions == types.BploUseStaticallyLinked &&
		!pc.HelmConfig.Enabled && !pc.FnpLoadingOptions.EnableExec && !pc.FnpLoadingOptions.Network
}

// snapshot reads every file and directory of an in-memory file system (paths relative to /).
func snapshot(fSys filesys.FileSystem) (map[string]*[]byte, error) {
	files := map[string]*[]byte{}
	err := fSys.Walk("/", func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path, "/")
		if rel == "" {
			return nil
		}
		if info.IsDir() {
			files[rel] = nil
			return nil
		}
		data, err := fSys.ReadFile(path)
		if err != nil {
			return err
		}
		files[rel] = &data
		return nil
	})
	return files, err
}

// callingTest names the test that called Run: the harness's name when it set one, else the
// Test function found on the stack; and the test file it is in.
func callingTest() (string, string) {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	name, source := "", ""
	for {
		frame, more := frames.Next()
		if strings.HasSuffix(frame.File, "_test.go") && strings.Contains(frame.Function, "krusty_test.") {
			fn := frame.Function[strings.LastIndex(frame.Function, "krusty_test.")+len("krusty_test."):]
			fn = strings.SplitN(fn, ".", 2)[0]
			if strings.HasPrefix(fn, "Test") {
				name, source = fn, filepath.Base(frame.File)
			}
		}
		if !more {
			break
		}
	}
	if conformanceTestName != "" {
		name = conformanceTestName
	}
	return name, source
}

type caseFile struct {
	Test           string `json:"test"`
	Source         string `json:"source"`
	Build          string `json:"build"`
	Expect         string `json:"expect"`
	LoadRestrictor string `json:"load_restrictor"`
	ErrorContains  string `json:"error_contains,omitempty"`
}

// writeCase writes <out>/<test>__run<N>/ (case.json, input/, expected.yaml for an output).
func writeCase(out, test, source string, o *Options, files map[string]*[]byte, path string,
	m resmap.ResMap, buildErr error) error {
	segments := strings.Split(test, "/")
	for i, segment := range segments {
		segments[i] = underscores.ReplaceAllString(unusualChars.ReplaceAllString(segment, "_"), "_")
	}
	folder := strings.Join(segments, "__")
	conformanceMu.Lock()
	conformanceRuns[folder]++
	folder = fmt.Sprintf("%s__run%d", folder, conformanceRuns[folder])
	conformanceMu.Unlock()
	dir := filepath.Join(out, folder)
	if err := os.MkdirAll(filepath.Join(dir, "input"), 0o755); err != nil {
		return err
	}
	for rel, data := range files {
		target := filepath.Join(dir, "input", filepath.FromSlash(rel))
		if data == nil {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, *data, 0o644); err != nil {
			return err
		}
	}
	build := strings.Trim(filepath.ToSlash(filepath.Clean("/"+path)), "/")
	if build == "" {
		build = "."
	}
	// As Run reads the option: anything but RootOnly restricts nothing.
	restrictor := types.LoadRestrictionsNone.String()
	if o.LoadRestrictions == types.LoadRestrictionsRootOnly {
		restrictor = o.LoadRestrictions.String()
	}
	c := caseFile{Test: test, Source: "api/krusty/" + source, Build: build,
		LoadRestrictor: restrictor}
	var yaml []byte
	if buildErr == nil {
		// `kustomize build` fails too when the result cannot be written as YAML.
		yaml, buildErr = m.AsYaml()
	}
	if buildErr != nil {
		c.Expect = "error"
		c.ErrorContains = buildErr.Error()
	} else {
		c.Expect = "output"
		if err := os.WriteFile(filepath.Join(dir, "expected.yaml"), yaml, 0o644); err != nil {
			return err
		}
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "case.json"), append(data, '\n'), 0o644)
}
