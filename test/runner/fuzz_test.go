package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/unsay/unsay/test/harness"
)

// makefileFuzzTargets returns the package:FuzzName pairs of the Makefile's
// FUZZ_TARGETS default, which `make fuzz` runs.
func makefileFuzzTargets(t *testing.T, makefile string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^FUZZ_TARGETS \?= (.*)$`).FindStringSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile sets no FUZZ_TARGETS default")
	}
	return strings.Fields(m[1])
}

// moduleFuzzTargets returns ./pkg:FuzzName for every func Fuzz… in the
// module's _test.go files (node_modules and testdata aside).
func moduleFuzzTargets(t *testing.T, root string) []string {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			out = append(out, "./"+filepath.ToSlash(rel)+":"+m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// missingTargets returns the targets in have that listed lacks.
func missingTargets(listed, have []string) []string {
	var out []string
	for _, h := range have {
		if !slices.Contains(listed, h) {
			out = append(out, h)
		}
	}
	return out
}

// `make fuzz` runs every fuzz target in the module (FuzzWriteBody
// included), and each it lists exists; the planted twin — a fuzz function
// the list does not name — is caught.
func TestMakeFuzz_RunsEveryFuzzTargetInTheModule(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	listed := makefileFuzzTargets(t, string(mk))
	have := moduleFuzzTargets(t, root)
	if !slices.Contains(have, "./bridge/httpapi:FuzzWriteBody") {
		t.Fatalf("the walk found %v: not looking at the right files", have)
	}
	if miss := missingTargets(listed, have); len(miss) > 0 {
		t.Errorf("make fuzz does not run %v (add them to FUZZ_TARGETS)", miss)
	}
	if gone := missingTargets(have, listed); len(gone) > 0 {
		t.Errorf("FUZZ_TARGETS lists %v, which no _test.go declares", gone)
	}
	if miss := missingTargets(listed, append(slices.Clone(have), "./models:FuzzPlanted")); !slices.Equal(miss, []string{"./models:FuzzPlanted"}) {
		t.Errorf("a fuzz function missing from the list is not caught: %v", miss)
	}
}
