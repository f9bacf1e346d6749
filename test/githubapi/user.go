package githubapi

import (
	"fmt"
	"net/http"
)

// authenticatedUser is GET /user's answer for a user token (a PAT), in
// GitHub's "private user" shape, the fields a client reads.
type authenticatedUser struct {
	Login     string `json:"login"`
	ID        int64  `json:"id"`
	NodeID    string `json:"node_id"`
	AvatarURL string `json:"avatar_url"`
	URL       string `json:"url"`
	HTMLURL   string `json:"html_url"`
	Type      string `json:"type"`
	SiteAdmin bool   `json:"site_admin"`
	Name      string `json:"name"`
}

// getUser answers GET /user as GitHub does: a user token gets its user; an
// installation token (an App's, or the workflow's GITHUB_TOKEN, whose
// comments are by "<app>[bot]") gets 403 "Resource not accessible by
// integration": it cannot say whom it posts as.
func (s *Server) getUser(w http.ResponseWriter, r *http.Request) {
	id, _ := r.Context().Value(identityKey{}).(Identity)
	if id.Type == "Bot" {
		writeError(w, http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	u := userOf(id)
	base := baseOf(r)
	writeJSON(w, http.StatusOK, authenticatedUser{
		Login: u.Login, ID: u.ID, NodeID: fmt.Sprintf("U_fake%d", u.ID),
		AvatarURL: fmt.Sprintf("%s/avatars/u/%d", base, u.ID),
		URL:       base + "/users/" + u.Login, HTMLURL: base + "/" + u.Login,
		Type: u.Type, Name: u.Login,
	})
}
