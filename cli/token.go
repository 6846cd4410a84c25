package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
)

func newTokenCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "token",
		Short:   "Create, list and revoke scoped tokens (admin)",
		GroupID: "daemon",
		Long: `Scoped tokens let an agent act for its own recipients only: another
recipient's watches, messages and events answer "not found". Only the admin
token may manage them. A token is shown once, when it is created; vigil keeps
only its hash. Revoking a token refuses it at once and cancels, silently, each
watch it made before that watch's next probe.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newTokenCreateCmd(e), newTokenListCmd(e), newTokenRevokeCmd(e))
	return cmd
}

func newTokenCreateCmd(e *env) *cobra.Command {
	var (
		cf      clientFlags
		forList []string
		kinds   []string
		repos   []string
		exec    bool
		expires string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "create --for R1[,R2] [--kinds K1,K2] [--repo github/OWNER/*]... [--exec] [--expires 30d]",
		Short: "Create a scoped token and print it (the only time it is shown)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(forList) == 0 {
				return usageErr(fmt.Errorf("--for is required: the recipients the token acts for"))
			}
			c, err := cf.client(e)
			if err != nil {
				return err
			}
			req := vigil.TokenCreateRequest{Recipients: forList, Repos: repos, Exec: exec, Expires: expires}
			for _, k := range kinds {
				req.Kinds = append(req.Kinds, vigil.Kind(k))
			}
			t, err := c.CreateToken(cmd.Context(), req)
			if err != nil {
				return callErr(cmd, err)
			}
			if asJSON {
				return writeJSON(e.stdout, t)
			}
			fmt.Fprintln(e.stdout, t.Secret)
			fmt.Fprintf(e.stderr, "Created %s for %s. This is the only time the token is shown; pass it as VIGIL_TOKEN.\n",
				t.ID, strings.Join(t.Recipients, ", "))
			return nil
		},
	}
	cf.bind(cmd, false)
	fl := cmd.Flags()
	fl.StringSliceVar(&forList, "for", nil, "recipients the token acts for (comma-separated)")
	fl.StringSliceVar(&kinds, "kinds", nil, "kinds it may register (comma-separated; default all)")
	fl.StringArrayVar(&repos, "repo", nil, "a repository its ci and ticket watches may name: a glob over PROVIDER/OWNER/NAME, like github/acme/* or gitlab/group/** (repeat for more; default any the daemon's forge credentials can read)")
	fl.BoolVar(&exec, "exec", false, "may register kinds that run commands (the daemon must allow exec too)")
	fl.StringVar(&expires, "expires", "", "expire after this long (30d) or at this RFC 3339 time")
	fl.BoolVar(&asJSON, "json", false, "print the token as JSON")
	return cmd
}

func newTokenListCmd(e *env) *cobra.Command {
	var (
		cf     clientFlags
		all    bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List scoped tokens (never their plaintext)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(e)
			if err != nil {
				return err
			}
			ts, err := c.Tokens(cmd.Context(), all)
			if err != nil {
				return callErr(cmd, err)
			}
			if asJSON {
				if ts == nil {
					ts = []*vigil.Token{}
				}
				return writeJSON(e.stdout, ts)
			}
			if len(ts) == 0 {
				fmt.Fprintln(e.stdout, "No scoped tokens.")
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRECIPIENTS\tKINDS\tREPOS\tEXEC\tCREATED\tEXPIRES\tREVOKED")
			for _, t := range ts {
				ks := "all"
				if len(t.Kinds) > 0 {
					s := make([]string, len(t.Kinds))
					for i, k := range t.Kinds {
						s[i] = string(k)
					}
					ks = strings.Join(s, ",")
				}
				repos := "any"
				if len(t.Repos) > 0 {
					repos = strings.Join(t.Repos, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\t%s\t%s\n", term(t.ID), term(strings.Join(t.Recipients, ",")), term(ks), term(repos), t.Exec,
					vigil.FormatTime(t.CreatedAt), dash(vigil.FormatTime(t.ExpiresAt)), dash(vigil.FormatTime(t.RevokedAt)))
			}
			return tw.Flush()
		},
	}
	cf.bind(cmd, false)
	cmd.Flags().BoolVar(&all, "all", false, "include revoked tokens")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newTokenRevokeCmd(e *env) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke scoped tokens; their watches are cancelled before their next probe",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c, err := cf.client(e)
			if err != nil {
				return err
			}
			for _, id := range ids {
				t, err := c.RevokeToken(cmd.Context(), id)
				if err != nil {
					return callErr(cmd, err)
				}
				fmt.Fprintf(e.stdout, "Revoked %s (since %s).\n", t.ID, vigil.FormatTime(t.RevokedAt))
			}
			return nil
		},
	}
	cf.bind(cmd, false)
	return cmd
}
