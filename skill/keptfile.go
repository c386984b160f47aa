package skill

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/unsay/unsay/models"
)

// The kept-reports file (P-24, finding V5 after a restart): the error
// reports the ledger could not take yet, saved so that neither a stop nor
// a crash (SIGKILL) loses one. It is rewritten whole — a temporary file
// beside it, fsync, rename, fsync of the folder — each time a report is
// kept or applied, and removed once none is kept, so at any moment it
// holds either the set before a change or the set after it, never part of
// one. A report applied but not yet removed from it when the process dies
// is applied again at the next start, which the ledger takes as it took
// the first (one response's report re-opens its marks once: finding F14).
// Reports are rare (the store must be failing), so the whole-file rewrite
// costs nothing in the common case: the file does not exist.

// keptFileVersion is the format of the kept-reports file.
const keptFileVersion = 1

// keptFile is the kept-reports file's JSON: every kept report, its
// patient's reports oldest first, the patients in name order.
type keptFile struct {
	Version int              `json:"version"`
	Reports []keptFileReport `json:"reports"`
}

// keptFileReport is one kept report in the file.
type keptFileReport struct {
	Patient string         `json:"patient"`
	Session string         `json:"session"`
	Marks   []keptFileMark `json:"marks"`
}

// keptFileMark is a models.Marked in the file, its URI as text.
type keptFileMark struct {
	URI         string `json:"uri"` // unversioned care URI
	HeardBefore int    `json:"heardBefore,omitempty"`
	From        int    `json:"from,omitempty"`
	Version     int    `json:"version"`
	Confirmed   bool   `json:"confirmed,omitempty"`
	Response    string `json:"response,omitempty"`
}

// encodeKept returns the file's bytes for queues and ahead (the reports
// saved before their first attempt, which came after the queued ones):
// nil when no report is kept (then the file is removed).
func encodeKept(queues map[string]*keptQueue, ahead map[string][]*keptReport) ([]byte, error) {
	f := keptFile{Version: keptFileVersion}
	var patients []string
	for p := range queues {
		patients = append(patients, p)
	}
	for p := range ahead {
		if queues[p] == nil {
			patients = append(patients, p)
		}
	}
	slices.Sort(patients)
	for _, p := range patients {
		var reports []keptReport
		if q := queues[p]; q != nil {
			reports = append(reports, q.reports...)
		}
		for _, r := range ahead[p] {
			reports = append(reports, *r)
		}
		for _, r := range reports {
			fr := keptFileReport{Patient: p, Session: r.session, Marks: make([]keptFileMark, len(r.marks))}
			for i, m := range r.marks {
				fr.Marks[i] = keptFileMark{URI: m.URI.String(), HeardBefore: m.HeardBefore, From: m.From,
					Version: m.Version, Confirmed: m.Confirmed, Response: m.Response}
			}
			f.Reports = append(f.Reports, fr)
		}
	}
	if len(f.Reports) == 0 {
		return nil, nil
	}
	return json.Marshal(f)
}

// keptEntry is one report read from the file.
type keptEntry struct {
	patient string
	report  keptReport
}

// readKeptFile reads the kept-reports file at path: its reports in the
// order saved; none when the file does not exist. Errors: the file cannot
// be read, is not the JSON encodeKept writes (unknown fields, another
// version, trailing data), or names an invalid patient id, a URI that does
// not parse, is versioned or is another patient's, or a version below 1.
func readKeptFile(path string) ([]keptEntry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f keptFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a kept-reports file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a kept-reports file: data after its JSON object")
	}
	if f.Version != keptFileVersion {
		return nil, fmt.Errorf("format version %d, this server reads %d", f.Version, keptFileVersion)
	}
	out := make([]keptEntry, 0, len(f.Reports))
	for i, r := range f.Reports {
		if !models.ValidID(r.Patient) {
			return nil, fmt.Errorf("report %d: patient %q is not a valid patient id", i+1, r.Patient)
		}
		e := keptEntry{patient: r.Patient, report: keptReport{session: r.Session, marks: make([]models.Marked, len(r.Marks))}}
		for j, m := range r.Marks {
			u, err := models.ParseURI(m.URI)
			switch {
			case err != nil:
				return nil, fmt.Errorf("report %d, mark %d: %w", i+1, j+1, err)
			case u.Version != 0 || u.Patient != r.Patient:
				return nil, fmt.Errorf("report %d, mark %d: %s is not an unversioned URI of patient %s", i+1, j+1, m.URI, r.Patient)
			case m.Version < 1:
				return nil, fmt.Errorf("report %d, mark %d: version %d", i+1, j+1, m.Version)
			}
			e.report.marks[j] = models.Marked{URI: u, HeardBefore: m.HeardBefore, From: m.From,
				Version: m.Version, Confirmed: m.Confirmed, Response: m.Response}
		}
		out = append(out, e)
	}
	return out, nil
}

// writeKeptFile replaces the file at path with b atomically and durably
// (temporary file, fsync, rename, fsync of the folder); nil b removes it.
// Errors are the file system's; on one the file holds what it held.
func writeKeptFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	if b == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return syncDir(dir)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs the folder dir, so a rename or removal in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
