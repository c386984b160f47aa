package models

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// invariantTests reads the invariant list of doc.go: P-n → the tests named
// with it, in the order listed.
func invariantTests(t *testing.T, doc string) (order []int, tests map[int][]string) {
	t.Helper()
	entry := regexp.MustCompile(`^//   - P-(\d+)\. `)
	name := regexp.MustCompile(`\bTest[A-Z0-9]\w*`)
	tests = map[int][]string{}
	cur := 0
	for _, line := range strings.Split(doc, "\n") {
		if m := entry.FindStringSubmatch(line); m != nil {
			cur, _ = strconv.Atoi(m[1])
			order = append(order, cur)
			line = line[len(m[0]):]
		} else if !strings.HasPrefix(line, "//     ") {
			cur = 0 // the entry ended
			continue
		}
		if cur != 0 {
			for _, n := range name.FindAllString(line, -1) {
				if n != "TestInvariants_EveryListedTestExists" {
					tests[cur] = append(tests[cur], n)
				}
			}
		}
	}
	return order, tests
}

// moduleTests returns the name of every func Test… in the module's _test.go
// files (whatever their build tags).
func moduleTests(t *testing.T, root string) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	found := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || (strings.HasPrefix(d.Name(), ".") && p != root)) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			found[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// missing lists the tests of the invariant list that are not in found.
func missing(tests map[int][]string, found map[string]bool) []string {
	var out []string
	for p, names := range tests {
		for _, n := range names {
			if !found[n] {
				out = append(out, "P-"+strconv.Itoa(p)+": "+n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// The invariant list in the package documentation names, for each of
// P-1…P-26 in order, tests that exist in the module: renaming or deleting
// a proving test fails here until the list follows.
func TestInvariants_EveryListedTestExists(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	order, tests := invariantTests(t, string(doc))
	want := make([]int, 26)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(order, want) {
		t.Fatalf("the list has P-%v, want P-1…P-26 in order", order)
	}
	for _, p := range order {
		if len(tests[p]) == 0 {
			t.Errorf("P-%d names no test", p)
		}
	}
	found := moduleTests(t, "..")
	if len(found) < 500 || !found["TestInvariants_EveryListedTestExists"] {
		t.Fatalf("found %d tests in the module; the walk is not reading it", len(found))
	}
	if m := missing(tests, found); len(m) > 0 {
		t.Errorf("listed tests that do not exist:\n%s", strings.Join(m, "\n"))
	}
	// Twin: a name that is not a test is reported.
	if m := missing(map[int][]string{4: {"TestNoSuchTest_Anywhere"}}, found); !slices.Equal(m, []string{"P-4: TestNoSuchTest_Anywhere"}) {
		t.Errorf("an unknown test name was not reported: %v", m)
	}
}
