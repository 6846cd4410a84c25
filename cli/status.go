package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
)

// statusMaxPages bounds how many pages of watches status counts.
const statusMaxPages = 20

func newStatusCmd(e *env) *cobra.Command {
	var (
		cf     clientFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "status",
		Short:   "Say whether the daemon is reachable, and count its watches",
		GroupID: "daemon",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(e)
			if err != nil {
				return err
			}
			// The store's kind and, on PostgreSQL, the replica's shards.
			info, err := c.Daemon(cmd.Context())
			if err != nil && vigil.ErrorCode(err) != vigil.CodeNotFound {
				return callErr(cmd, err)
			}
			counts := map[vigil.State]int{}
			total, unreadable, more := 0, 0, false
			q := vigil.ListRequest{Limit: 1000}
			for i := 0; ; i++ {
				if i == statusMaxPages {
					more = true
					break
				}
				page, err := c.Watches(cmd.Context(), q)
				if err != nil {
					return callErr(cmd, err)
				}
				for _, w := range page.Watches {
					counts[w.State]++
					total++
					if w.Unreadable != "" {
						unreadable++
					}
				}
				if page.Next == "" || len(page.Watches) == 0 {
					break
				}
				q.After = page.Next
			}
			addr := firstNonEmpty(cf.addr, e.getenv("VIGIL_ADDR"), daemon.DefaultListen)
			if asJSON {
				return writeJSON(e.stdout, struct {
					Addr       string              `json:"addr"`
					Reachable  bool                `json:"reachable"`
					Version    string              `json:"cli_version"`
					Watches    map[vigil.State]int `json:"watches"`
					Total      int                 `json:"total"`
					More       bool                `json:"more,omitempty"`
					Unreadable int                 `json:"unreadable,omitempty"`
					Daemon     *client.DaemonInfo  `json:"daemon,omitempty"`
				}{addr, true, vigil.Version(), counts, total, more, unreadable, daemonInfo(info)})
			}
			fmt.Fprintf(e.stdout, "vigil daemon at %s: reachable\n", addr)
			fmt.Fprintf(e.stdout, "cli version: %s\n", vigil.Version())
			if info.Store != "" {
				fmt.Fprintf(e.stdout, "store: %s, replica %s: %s\n", info.Store, info.Replica, info.Role)
			}
			if info.ShardCount > 0 {
				fmt.Fprintf(e.stdout, "shards held: %d of %d %s\n", len(info.Shards), info.ShardCount, shardList(info.Shards))
			}
			if k := info.Keys; k != nil {
				// Fingerprints only: every replica on one database
				// shows the same.
				fmt.Fprintf(e.stdout, "signing keys: webhook.secret %s, link.key %s\n", term(strings.Join(k.WebhookSecret, " ")), term(k.LinkKey))
				if s := k.Settings; s != (client.SettingsFingerprints{}) {
					fmt.Fprintf(e.stdout, "signing settings: webhook_secrets %s, webhooks %s, public_url %s\n",
						term(s.WebhookSecrets), term(s.Webhooks), term(s.PublicURL))
				}
			}
			fmt.Fprintf(e.stdout, "watches: %s\n", countLine(counts, total, more))
			if unreadable > 0 {
				fmt.Fprintf(e.stdout, "unreadable: %d (their stored rows cannot be read in full; vigil ls shows which and why)\n", unreadable)
			}
			return nil
		},
	}
	cf.bind(cmd, false)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// daemonInfo is info, or nil when the daemon did not say (an older one).
func daemonInfo(info client.DaemonInfo) *client.DaemonInfo {
	if info.Store == "" {
		return nil
	}
	return &info
}

// countLine says "3 (2 pending, 1 fired)".
func countLine(counts map[vigil.State]int, total int, more bool) string {
	plus := ""
	if more {
		plus = "+"
	}
	if total == 0 {
		return "none"
	}
	states := make([]string, 0, len(counts))
	for s := range counts {
		states = append(states, string(s))
	}
	// Pending first, then the rest by name.
	sort.Slice(states, func(i, j int) bool {
		if (states[i] == string(vigil.StatePending)) != (states[j] == string(vigil.StatePending)) {
			return states[i] == string(vigil.StatePending)
		}
		return states[i] < states[j]
	})
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = fmt.Sprintf("%d %s", counts[vigil.State(s)], term(s))
	}
	return fmt.Sprintf("%d%s (%s)", total, plus, strings.Join(parts, ", "))
}

// shardList says which shards a replica holds, in ranges: "[0-3 7 9-10]".
func shardList(ss []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < len(ss); {
		j := i
		for j+1 < len(ss) && ss[j+1] == ss[j]+1 {
			j++
		}
		if b.Len() > 1 {
			b.WriteByte(' ')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", ss[i], ss[j])
		} else {
			fmt.Fprintf(&b, "%d", ss[i])
		}
		i = j + 1
	}
	b.WriteByte(']')
	return b.String()
}
