package githubapi

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// App is a GitHub App the server knows: requests authenticated with a JWT
// it signed (RS256, iss = its ID) may look up its installations and mint
// installation tokens, as on GitHub.
type App struct {
	ID   int64
	Slug string // its bot is "<slug>[bot]"
	Key  *rsa.PublicKey
	// Installations maps an installation ID to the repositories
	// ("owner/name") it covers.
	Installations map[int64][]string
	// TokenTTL is how long minted tokens live (GitHub: one hour); a token
	// stops authenticating when it expires.
	TokenTTL time.Duration
}

// MintedToken is one installation token the server issued.
type MintedToken struct {
	Installation int64
	Token        string
	ExpiresAt    time.Time
}

type appState struct {
	app    App
	minted []MintedToken
}

// AddApp makes the server accept JWTs of app. A zero TokenTTL is an hour.
func (s *Server) AddApp(app App) {
	if app.TokenTTL == 0 {
		app.TokenTTL = time.Hour
	}
	if app.Slug == "" {
		app.Slug = "kplan"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.app = &appState{app: app}
}

// Minted returns the installation tokens issued so far, oldest first.
func (s *Server) Minted() []MintedToken {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.app == nil {
		return nil
	}
	return append([]MintedToken(nil), s.app.minted...)
}

// ValidToken reports whether token authenticates now (a token added with
// AddToken, or a minted one not expired).
func (s *Server) ValidToken(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tokens[token]
	return ok
}

// serveApp answers the App's own endpoints, which authenticate with a JWT
// rather than a token; it reports whether r was one of them.
func (s *Server) serveApp(w http.ResponseWriter, r *http.Request) bool {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPost && len(parts) == 4 && parts[0] == "app" && parts[1] == "installations" && parts[3] == "access_tokens":
		app, ok := s.checkJWT(w, r)
		if !ok {
			return true
		}
		id, err := strconv.ParseInt(parts[2], 10, 64)
		if _, installed := app.Installations[id]; err != nil || !installed {
			writeError(w, http.StatusNotFound, "Not Found")
			return true
		}
		s.mint(w, app, id)
		return true
	case r.Method == http.MethodGet && len(parts) == 4 && parts[0] == "repos" && parts[3] == "installation":
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ey") {
			return false // not a JWT: the ordinary authentication answers
		}
		app, ok := s.checkJWT(w, r)
		if !ok {
			return true
		}
		repo := parts[1] + "/" + parts[2]
		for id, repos := range app.Installations {
			for _, rp := range repos {
				if strings.EqualFold(rp, repo) {
					writeJSON(w, http.StatusOK, map[string]any{
						"id": id, "app_id": app.ID, "app_slug": app.Slug,
						"account":              map[string]any{"login": parts[1]},
						"repository_selection": "selected",
						"target_type":          "Organization",
					})
					return true
				}
			}
		}
		writeError(w, http.StatusNotFound, "Not Found")
		return true
	}
	return false
}

// checkJWT verifies the request's JWT as GitHub does: RS256, signed by
// the App's key, iss the App's ID, issued at most a minute ahead and
// expiring in the future, at most ten minutes after it was issued.
func (s *Server) checkJWT(w http.ResponseWriter, r *http.Request) (App, bool) {
	s.mu.Lock()
	st := s.app
	s.mu.Unlock()
	if st == nil {
		writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return App{}, false
	}
	app := st.app
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return app, false
	}
	if err := verifyJWT(raw, app, time.Now()); err != nil {
		writeError(w, http.StatusUnauthorized, err.Error())
		return app, false
	}
	return app, true
}

func verifyJWT(raw string, app App, now time.Time) error {
	bad := fmt.Errorf("A JSON web token could not be decoded")
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return bad
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if decodeSegment(parts[0], &header) != nil {
		return bad
	}
	if header.Alg != "RS256" {
		return fmt.Errorf("JWT algorithm %q is not RS256", header.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return bad
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(app.Key, crypto.SHA256, sum[:], sig) != nil {
		return fmt.Errorf("A JSON web token could not be decoded") // GitHub says no more for a wrong key
	}
	var claims struct {
		Iss json.RawMessage `json:"iss"`
		Iat *json.Number    `json:"iat"`
		Exp *json.Number    `json:"exp"`
	}
	if decodeSegment(parts[1], &claims) != nil {
		return bad
	}
	iss := strings.Trim(string(claims.Iss), `"`)
	if iss != strconv.FormatInt(app.ID, 10) {
		return fmt.Errorf("Integration not found")
	}
	if claims.Iat == nil || claims.Exp == nil {
		return fmt.Errorf("Missing 'issued at' or 'expiration time' claim")
	}
	iat, err1 := claims.Iat.Int64()
	exp, err2 := claims.Exp.Int64()
	if err1 != nil || err2 != nil {
		return fmt.Errorf("'Issued at' and 'Expiration time' claims must be integers")
	}
	switch {
	case time.Unix(iat, 0).After(now.Add(time.Minute)):
		return fmt.Errorf("'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued")
	case !time.Unix(exp, 0).After(now):
		return fmt.Errorf("'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires")
	case exp-iat > 600:
		return fmt.Errorf("'Expiration time' claim ('exp') is too far in the future")
	}
	return nil
}

func decodeSegment(seg string, v any) error {
	data, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	d := json.NewDecoder(strings.NewReader(string(data)))
	d.UseNumber()
	return d.Decode(v)
}

// mint issues a token for installation id, valid for the App's TokenTTL.
func (s *Server) mint(w http.ResponseWriter, app App, id int64) {
	b := make([]byte, 18)
	rand.Read(b)
	token := "ghs_" + hex.EncodeToString(b)
	expires := time.Now().Add(app.TokenTTL).UTC().Truncate(time.Second)
	s.mu.Lock()
	s.tokens[token] = Identity{Login: app.Slug + "[bot]", Type: "Bot"}
	s.app.minted = append(s.app.minted, MintedToken{Installation: id, Token: token, ExpiresAt: expires})
	s.mu.Unlock()
	time.AfterFunc(time.Until(expires), func() {
		s.mu.Lock()
		delete(s.tokens, token)
		s.mu.Unlock()
	})
	perms := map[string]string{"contents": "read", "statuses": "write", "deployments": "write", "pull_requests": "write", "metadata": "read"}
	writeJSON(w, http.StatusCreated, map[string]any{
		"token": token, "expires_at": expires.Format(time.RFC3339),
		"permissions": perms, "repository_selection": "selected",
	})
}

// Revoke makes token stop authenticating now, before its expiry, as on
// GitHub when an installation token is revoked or the App's key rotated:
// requests with it are answered 401.
func (s *Server) Revoke(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, token)
}
