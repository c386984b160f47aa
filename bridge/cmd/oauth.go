package cmd

// The embedded authorization server's commands: clients,
// grants, and tokens signed with its key. They work on the database
// directly, beside a running server (SQLite WAL or Postgres): a revocation
// is effective on the next request, because the resource server checks the
// grant on every one.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/bridge/oauth"
	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
	"github.com/unsay/unsay/store/envelope"
)

// splitSubcommand takes "add", "list", … and an optional leading id
// ("approve ID --scope …"), so flags may follow the id; "-- ID" gives an id
// that starts with "-".
func splitSubcommand(args []string, subs ...string) (sub, id string, rest []string, err error) {
	if len(args) == 0 || !contains(subs, args[0]) {
		return "", "", nil, fmt.Errorf("want one of: %s", strings.Join(subs, ", "))
	}
	sub, rest = args[0], args[1:]
	switch {
	case len(rest) > 1 && rest[0] == "--": // an id that starts with "-" (made before ids had a prefix)
		id, rest = rest[1], rest[2:]
	case len(rest) > 0 && !strings.HasPrefix(rest[0], "-"):
		id, rest = rest[0], rest[1:]
	}
	return sub, id, rest, nil
}

// idAfterFlags is the subcommand's id: id when it came first ("revoke ID
// --db …"), else the one argument that followed the flags ("revoke --db …
// ID"; finding V6b), else "". Two ids, or one after an id, are a usage
// error naming them.
func idAfterFlags(cmd, sub, id string, extra []string) (string, error) {
	switch {
	case len(extra) == 0:
		return id, nil
	case id == "" && len(extra) == 1:
		return extra[0], nil
	}
	ids := extra
	if id != "" {
		ids = append([]string{id}, extra...)
	}
	return "", usageErr(cmd, "%s takes one id; got %q", sub, ids)
}

// needID refuses a missing id where one is needed, and a stray one elsewhere.
func needID(sub, id string, needed bool, cmd string) error {
	switch {
	case needed && id == "":
		return fmt.Errorf("%s %s: give the id first: unsay %s %s ID …", cmd, sub, cmd, sub)
	case !needed && id != "":
		return fmt.Errorf("%s %s: unexpected argument %q", cmd, sub, id)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// openForOAuth opens the store for an oauth command (the envelope is needed
// only to open signing keys: `unsay token --db`).
func openForOAuth(ctx context.Context, cmd, db, env string) (*store.Store, error) {
	return openOffline(ctx, cmd, db, envelope.Config{Mode: env})
}

// cmdClient manages OAuth clients of the embedded authorization server:
//
//	unsay client add --name NAME [--redirect-uri URI]… [--grant G]… [--public] [--db PATH]
//	unsay client list [--db PATH]
//	unsay client approve ID --scope care.read.assistant --by CLINICIAN [--db PATH]
//	unsay client approve ID --withdraw --by CLINICIAN [--db PATH]
//	unsay client remove ID --by NAME [--db PATH]
//
// add prints the client id and, for a confidential client, its secret —
// shown once, stored only as a hash. --grant is authorization_code
// (default; refresh_token comes with it) or client_credentials. approve is
// a clinician's approval of scopes the consent page never grants
// (care.read.assistant); remove disables the client and revokes its grants.
func cmdClient(ctx context.Context, args []string) error {
	c, fs := newCommand("client")
	db := fs.String("db", app.DefaultDB, "SQLite database file, or a postgres:// URL")
	var redirects, grants, scopes listFlag
	name := fs.String("name", "", "the client's name, shown on the consent page (add)")
	fs.Var(&redirects, "redirect-uri", "redirect URI (add; repeatable): Alexa's are https://pitangui.amazon.com/api/skill/link/VENDOR, layla.amazon.com, alexa.amazon.co.jp")
	fs.Var(&grants, "grant", "authorization_code or client_credentials (add; repeatable)")
	public := fs.Bool("public", false, "a public client: no secret, PKCE only (add)")
	fs.Var(&scopes, "scope", "scope to approve (approve; repeatable): "+scopeList(oauth.ApprovableScopes()))
	withdraw := fs.Bool("withdraw", false, "withdraw every approval (approve)")
	by := fs.String("by", "", "who approves or removes (approve, remove): the audit of the grant names them")
	sub, id, rest, err := splitSubcommand(args, "add", "list", "approve", "remove")
	if err != nil {
		if _, perr := parseFlags(c, fs, args); perr != nil {
			return perr // -h and --help print the help
		}
		return usageErr("client", "%v", err)
	}
	extra, err := parseFlags(c, fs, rest)
	if err != nil {
		return err
	}
	if id, err = idAfterFlags("client", sub, id, extra); err != nil {
		return err
	}
	if err := needID(sub, id, sub == "approve" || sub == "remove", "client"); err != nil {
		return err
	}
	s, err := openForOAuth(ctx, "client", *db, "none")
	if err != nil {
		return err
	}
	defer s.Close()
	now := time.Now()
	switch sub {
	case "add":
		if strings.TrimSpace(*name) == "" {
			return errors.New("client add: --name is required")
		}
		cid, secret, err := oauth.RegisterClient(ctx, s, *name, redirects, grants, *public, now)
		if err != nil {
			return err
		}
		fmt.Printf("client_id\t%s\n", cid)
		if secret != "" {
			fmt.Printf("client_secret\t%s\n", secret)
			fmt.Fprintln(os.Stderr, "unsay: the client secret is shown once; Unsay keeps only its hash")
		}
	case "list":
		cs, err := s.OAuthClients(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tKIND\tNAME\tGRANTS\tAPPROVED\tSTATUS")
		for _, c := range cs {
			approved := "-"
			if len(c.ApprovedScopes) > 0 {
				approved = strings.Join(c.ApprovedScopes, " ") + " by " + c.ApprovedBy
			}
			status := "active"
			if c.Disabled {
				status = "removed"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Kind, c.Name, strings.Join(c.GrantTypes, ","), approved, status)
		}
		return w.Flush()
	case "approve":
		if *by == "" {
			return errors.New("client approve: --by names the clinician who approves")
		}
		if *withdraw == (len(scopes) > 0) {
			return errors.New("client approve: give --scope (repeatable) or --withdraw")
		}
		sc := make([]models.Scope, len(scopes))
		for i, v := range scopes {
			sc[i] = models.Scope(v)
		}
		if err := oauth.ApproveClient(ctx, s, id, sc, *by, now); err != nil {
			return noClient(id, err)
		}
		fmt.Printf("%s approved for %s by %s\n", scopeOrNone(scopes), id, *by)
	case "remove":
		if *by == "" {
			return errors.New("client remove: --by names who removes it")
		}
		if err := s.DisableOAuthClient(ctx, id, *by, now); err != nil {
			return noClient(id, err)
		}
		fmt.Printf("%s removed; its grants are revoked\n", id)
	}
	return nil
}

func noClient(id string, err error) error {
	if errors.Is(err, store.ErrOAuthNotFound) {
		return fmt.Errorf("no client %q (unsay client list)", id)
	}
	return err
}

func scopeList(scopes []models.Scope) string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

func scopeOrNone(s []string) string {
	if len(s) == 0 {
		return "no extra scope"
	}
	return strings.Join(s, " ")
}

// cmdGrants lists and revokes what people granted OAuth clients:
//
//	unsay grants list [--patient P|-] [--client ID] [--all] [--db PATH]
//	unsay grants revoke ID [--by NAME] [--db PATH]   (-- ID for an id that starts with "-")
//
// list shows active grants (--all: revoked ones too) of every patient, or
// of --patient P; --patient - lists the grants bound to no patient (a
// client's own and the speech principal's, shown with - in the PATIENT
// column). A patient id that is not one, or an argument after list, is a
// usage error saying what list wants. revoke takes effect
// on the next request: the resource server checks the grant on every one,
// refresh checks it, and the grant's refresh tokens are deleted.
func cmdGrants(ctx context.Context, args []string) error {
	c, fs := newCommand("grants")
	db := fs.String("db", app.DefaultDB, "SQLite database file, or a postgres:// URL")
	patient := fs.String("patient", "", "only this patient's grants (list; - for those bound to no patient; default every patient's)")
	clientID := fs.String("client", "", "only this client's grants (list)")
	all := fs.Bool("all", false, "revoked grants too (list)")
	by := fs.String("by", "operator", "who revokes (revoke)")
	sub, id, rest, err := splitSubcommand(args, "list", "revoke")
	if err != nil {
		if _, perr := parseFlags(c, fs, args); perr != nil {
			return perr // -h and --help print the help
		}
		return usageErr("grants", "%v", err)
	}
	extra, err := parseFlags(c, fs, rest)
	if err != nil {
		return err
	}
	if sub == "list" {
		if id != "" {
			extra = append([]string{id}, extra...)
		}
		if err := grantsListArgs(*patient, extra); err != nil {
			return err
		}
	} else if id, err = idAfterFlags("grants", sub, id, extra); err != nil {
		return err
	} else if err := needID(sub, id, true, "grants"); err != nil {
		return err
	}
	s, err := openForOAuth(ctx, "grants", *db, "none")
	if err != nil {
		return err
	}
	defer s.Close()
	if sub == "revoke" {
		if err := s.RevokeOAuthGrant(ctx, id, *by, time.Now()); err != nil {
			if errors.Is(err, store.ErrOAuthNotFound) {
				return fmt.Errorf("no grant %q (unsay grants list --all)", id)
			}
			return err
		}
		fmt.Printf("grant %s revoked\n", id)
		return nil
	}
	f := store.OAuthGrantFilter{Patient: *patient, ClientID: *clientID, ActiveOnly: !*all}
	if *patient == noPatient {
		f.Patient = ""
	}
	gs, err := s.OAuthGrants(ctx, f)
	if err != nil {
		return err
	}
	if *patient == noPatient {
		gs = slices.DeleteFunc(gs, func(g store.OAuthGrant) bool { return g.Patient != "" })
	}
	names := map[string]string{}
	if cs, err := s.OAuthClients(ctx); err == nil {
		for _, c := range cs {
			names[c.ID] = c.Name
		}
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tKIND\tCLIENT\tPATIENT\tSCOPES\tCREATED\tSTATUS")
	for _, g := range gs {
		client := g.ClientID
		if n := names[g.ClientID]; n != "" {
			client = n + " (" + g.ClientID + ")"
		}
		status := "active"
		if !g.Active() {
			status = "revoked " + g.RevokedAt.Format(time.RFC3339) + " by " + g.RevokedBy
		}
		pt := g.Patient
		if pt == "" {
			pt = noPatient
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.Kind, client, pt, strings.Join(g.Scopes, " "), g.CreatedAt.Format(time.RFC3339), status)
	}
	return w.Flush()
}

// noPatient is how `unsay grants list` writes, and --patient names, a
// grant bound to no patient.
const noPatient = "-"

// grantsListArgs checks list's --patient (a patient id, noPatient or
// empty) and that nothing follows list but flags.
func grantsListArgs(patient string, extra []string) error {
	if len(extra) > 0 {
		if extra[0] == noPatient {
			return usageErr("grants", "list takes no argument %q: for the grants bound to no patient give --patient -", extra[0])
		}
		return usageErr("grants", "list takes no argument %q: narrow it with --patient P (or -), --client ID, --all", extra[0])
	}
	if patient != "" && patient != noPatient && !models.ValidID(patient) {
		return usageErr("grants", "--patient %q is not a patient id: give one like --patient ray, or --patient - for the grants bound to no patient", patient)
	}
	return nil
}

// mintWithAS signs a token with the embedded authorization server's key in
// the database at db (`unsay token --db`): the way to mint an operator's
// token for a server on a public URL, where HS256 is off. Each token gets
// its own internal grant, so `unsay grants revoke` ends it.
func mintWithAS(ctx context.Context, db, env, publicURL, sub string, scopes []models.Scope, patients []string, ttl time.Duration) (string, error) {
	s, err := openForOAuth(ctx, "token", db, env)
	if err != nil {
		return "", err
	}
	defer s.Close()
	as, err := oauth.New(ctx, oauth.Config{Store: s, Issuer: publicURL})
	if err != nil {
		return "", err
	}
	grant := "internal:cli:" + sub + ":" + time.Now().UTC().Format("20060102T150405.000")
	tok, err := as.MintOperator(ctx, grant, sub, scopes, patients, ttl)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "unsay: signed by the embedded authorization server (grant %s; revoke with: unsay grants revoke %s)\n", grant, grant)
	return tok, nil
}
