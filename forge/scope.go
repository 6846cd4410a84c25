package forge

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Bounds of a token's repos scope.
const (
	// MaxRepoPatterns bounds how many patterns one token carries.
	MaxRepoPatterns = 64
	// MaxRepoPattern bounds one pattern, in bytes.
	MaxRepoPattern = 300
)

// RepoPath names a watch's repository as a token's repos scope matches
// it: the provider and the repository as ParseRepo spells it, lowercase,
// "github/acme/api" or "gitlab/group/sub/name".
func RepoPath(p Provider, repo string) string { return string(p) + "/" + strings.ToLower(repo) }

// ParseRepoPattern checks one pattern of a token's repos scope and
// returns it lowercased (repositories are matched without regard to
// case). A pattern is a doublestar glob over RepoPath: its first segment
// is a provider (github, gitea, gitlab) or "*" for any; "*" matches
// within one segment, "**" across segments ("gitlab/group/**").
func ParseRepoPattern(s string) (string, error) {
	const want = `a glob over PROVIDER/OWNER/NAME, like "github/acme/*" or "gitlab/group/**"`
	switch {
	case s == "":
		return "", errors.New("is empty: give " + want)
	case len(s) > MaxRepoPattern:
		return "", fmt.Errorf("is longer than %d bytes", MaxRepoPattern)
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }):
		return "", errors.New("holds white space, a control character or a backslash: give " + want)
	}
	s = strings.ToLower(s)
	segs := strings.Split(s, "/")
	if len(segs) < 2 {
		return "", errors.New("names no repository: give " + want)
	}
	if p := Provider(segs[0]); !Known(p) && segs[0] != "*" {
		return "", fmt.Errorf("must start with github/, gitea/, gitlab/ or */ (the watch's provider), not %q: give %s", segs[0], want)
	}
	for _, seg := range segs[1:] {
		if seg == "" {
			return "", errors.New("has an empty segment (a leading, trailing or doubled slash): give " + want)
		}
	}
	if !doublestar.ValidatePattern(s) {
		return "", errors.New("is not a valid glob (an unclosed [ or {): give " + want)
	}
	return s, nil
}

// MatchRepo reports whether path (a RepoPath) matches one of patterns
// (each as ParseRepoPattern returns it).
func MatchRepo(patterns []string, path string) bool {
	path = strings.ToLower(path)
	for _, p := range patterns {
		if ok, err := doublestar.Match(p, path); err == nil && ok {
			return true
		}
	}
	return false
}
