package adminui

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
)

// Every page handler reads through the admin operations; every form post runs one admin
// operation, then redirects to its page with a notice (or re-renders the page with the
// error banner and the error's HTTP status). Inputs are never echoed back into a form.

// Form values of a post (checkPost has parsed and checked them).
func (c *call) text(name string) string { return strings.TrimSpace(c.r.PostForm.Get(name)) }
func (c *call) area(name string) string {
	return strings.ReplaceAll(c.r.PostForm.Get(name), "\r\n", "\n")
}
func (c *call) checked(name string) bool { return c.r.PostForm.Get(name) != "" }
func (c *call) path(name string) string  { return c.r.PathValue(name) }

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// list splits addresses typed one per line, or separated by spaces or commas.
func list(s string) []string {
	return append([]string{}, strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })...)
}

// flag reads an optional "true"/"false" form value.
func (c *call) flag(name string) (*bool, *apierr.Error) {
	switch c.r.PostForm.Get(name) {
	case "":
		return nil, nil
	case "true":
		return new(true), nil
	case "false":
		return new(false), nil
	}
	return nil, apierr.Invalid(name, "must be true or false")
}

// pathID parses a UUID path segment as the HTTP transport does.
func (c *call) pathID(name, field string) (uuid.UUID, *apierr.Error) {
	id, err := uuid.Parse(c.path(name))
	if err != nil {
		return uuid.UUID{}, apierr.Invalid(field, "the parameter has the wrong format")
	}
	return id, nil
}

// failPage renders an error in place of a page that could not be loaded.
func (u *UI) failPage(c *call, e *apierr.Error) {
	u.show(c, e.Code.HTTPStatus(), "message", page{Title: "Error", Error: describe(e)})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func onOff(b bool, on, off string) string {
	if b {
		return on
	}
	return off
}

// ---- boxes ----

func (u *UI) listBoxes(ctx context.Context) ([]api.AdminBox, *apierr.Error) {
	out, e := run[api.AdminBoxList200JSONResponse](ctx, u, "admin_box_list", input(nil, nil), func(ctx context.Context) (any, error) {
		return u.svc.AdminBoxList(ctx, api.AdminBoxListRequestObject{})
	})
	return out.Items, e
}

func (u *UI) boxesPage(c *call) { u.showBoxes(c, http.StatusOK, nil) }

func (u *UI) showBoxes(c *call, status int, b *banner) {
	boxes, e := u.listBoxes(c.r.Context())
	if e != nil {
		u.failPage(c, e)
		return
	}
	u.show(c, status, "boxes", page{Title: "Boxes", Error: b, Data: boxes})
}

func (u *UI) boxCreate(c *call) {
	body := api.AdminBoxCreateInput{BoxKey: c.text("box_key"), Name: optional(c.text("name"))}
	box, e := run[api.AdminBoxCreate200JSONResponse](c.r.Context(), u, "admin_box_create", input(nil, body), func(ctx context.Context) (any, error) {
		return u.svc.AdminBoxCreate(ctx, api.AdminBoxCreateRequestObject{Body: &body})
	})
	if e != nil {
		u.showBoxes(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	u.done(c, "Box "+box.BoxKey+" created.", "/admin/boxes")
}

func (u *UI) boxEnabled(c *call) {
	key := c.path("box")
	enabled, e := c.flag("enabled")
	if e == nil && enabled == nil {
		e = apierr.Invalid("enabled", "is required")
	}
	if e == nil {
		body := api.AdminBoxUpdateInput{Enabled: enabled}
		_, e = run[api.AdminBoxUpdate200JSONResponse](c.r.Context(), u, "admin_box_update", input(map[string]any{"box_key": key}, body), func(ctx context.Context) (any, error) {
			return u.svc.AdminBoxUpdate(ctx, api.AdminBoxUpdateRequestObject{BoxKey: key, Body: &body})
		})
	}
	if e != nil {
		u.showBoxes(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	u.done(c, "Box "+key+" "+onOff(*enabled, "enabled", "disabled")+".", "/admin/boxes")
}

// ---- one box: hosts and agents ----

type boxData struct {
	Box    api.AdminBox
	Hosts  []api.AdminHost
	Agents []api.AdminAgent
}

func (u *UI) findBox(ctx context.Context, key string) (api.AdminBox, *apierr.Error) {
	boxes, e := u.listBoxes(ctx)
	if e != nil {
		return api.AdminBox{}, e
	}
	i := slices.IndexFunc(boxes, func(b api.AdminBox) bool { return b.BoxKey == key })
	if i < 0 {
		return api.AdminBox{}, apierr.NotFound().WithField("box_key")
	}
	return boxes[i], nil
}

func (u *UI) listHosts(ctx context.Context, key string) ([]api.AdminHost, *apierr.Error) {
	out, e := run[api.AdminHostList200JSONResponse](ctx, u, "admin_host_list", input(map[string]any{"box_key": key}, nil), func(ctx context.Context) (any, error) {
		return u.svc.AdminHostList(ctx, api.AdminHostListRequestObject{BoxKey: key})
	})
	return out.Items, e
}

func (u *UI) listAgents(ctx context.Context, key string) ([]api.AdminAgent, *apierr.Error) {
	out, e := run[api.AdminAgentList200JSONResponse](ctx, u, "admin_agent_list", input(map[string]any{"box_key": key}, nil), func(ctx context.Context) (any, error) {
		return u.svc.AdminAgentList(ctx, api.AdminAgentListRequestObject{BoxKey: key})
	})
	return out.Items, e
}

func (u *UI) boxPage(c *call) { u.showBox(c, http.StatusOK, nil) }

func (u *UI) showBox(c *call, status int, b *banner) {
	ctx, key := c.r.Context(), c.path("box")
	var d boxData
	var e *apierr.Error
	if d.Box, e = u.findBox(ctx, key); e == nil {
		if d.Hosts, e = u.listHosts(ctx, key); e == nil {
			d.Agents, e = u.listAgents(ctx, key)
		}
	}
	if e != nil {
		u.failPage(c, e)
		return
	}
	u.show(c, status, "box", page{Title: "Box " + key, Box: key, Tab: "box", Error: b, Data: d})
}

func (u *UI) hostCreate(c *call) {
	key := c.path("box")
	body := api.AdminHostCreateInput{Name: c.text("name"), Ips: list(c.r.PostForm.Get("ips"))}
	h, e := run[api.AdminHostCreate200JSONResponse](c.r.Context(), u, "admin_host_create", input(map[string]any{"box_key": key}, body), func(ctx context.Context) (any, error) {
		return u.svc.AdminHostCreate(ctx, api.AdminHostCreateRequestObject{BoxKey: key, Body: &body})
	})
	if e != nil {
		u.showBox(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	u.done(c, "Host "+h.Name+" registered.", "/admin/boxes/"+key)
}

func (u *UI) hostUpdate(c *call) {
	key, host := c.path("box"), c.path("host")
	body := api.AdminHostUpdateInput{Ips: list(c.r.PostForm.Get("ips"))}
	h, e := run[api.AdminHostUpdate200JSONResponse](c.r.Context(), u, "admin_host_update", input(map[string]any{"box_key": key, "host_name": host}, body), func(ctx context.Context) (any, error) {
		return u.svc.AdminHostUpdate(ctx, api.AdminHostUpdateRequestObject{BoxKey: key, HostName: host, Body: &body})
	})
	if e != nil {
		u.showBox(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	u.done(c, "IPs of host "+h.Name+" saved.", "/admin/boxes/"+key)
}

// secretData is a result page that shows a new API key once; it is kept nowhere.
type secretData struct {
	What, Agent, AgentID, KeyID, Secret, Back string
	Router                                    bool
}

func (u *UI) agentCreate(c *call) {
	key := c.path("box")
	body := api.AdminAgentCreateInput{HostName: c.text("host_name"), Name: c.text("name"), Listed: new(c.checked("listed")),
		Role: optional(c.text("role")), Description: optional(c.text("description")), ProfileText: optional(c.area("profile_text"))}
	res, e := run[api.AdminAgentCreate200JSONResponse](c.r.Context(), u, "admin_agent_create", input(map[string]any{"box_key": key}, body), func(ctx context.Context) (any, error) {
		return u.svc.AdminAgentCreate(ctx, api.AdminAgentCreateRequestObject{BoxKey: key, Body: &body})
	})
	if e != nil {
		u.showBox(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	id := res.Agent.AgentId.String()
	u.show(c, http.StatusOK, "secret", page{Title: "Agent created", Box: key, Tab: "box", Data: secretData{
		What: "agent", Agent: res.Agent.Name, AgentID: id, KeyID: res.KeyId.String(), Secret: res.ApiKey,
		Back: "/admin/boxes/" + key + "/agents/" + id}})
}

// ---- one agent: flags, profile, keys ----

type agentData struct {
	Agent   api.AdminAgent
	Keys    []api.AdminKey
	Profile api.Profile // the current private profile, shown in the form that replaces it
}

func (u *UI) agentPage(c *call) { u.showAgent(c, http.StatusOK, nil) }

func (u *UI) showAgent(c *call, status int, b *banner) {
	ctx, key, ref := c.r.Context(), c.path("box"), c.path("agent")
	agents, e := u.listAgents(ctx, key)
	if e != nil {
		u.failPage(c, e)
		return
	}
	i := slices.IndexFunc(agents, func(a api.AdminAgent) bool { return a.AgentId.String() == ref })
	if i < 0 {
		u.failPage(c, apierr.NotFound().WithField("agent_ref"))
		return
	}
	keys, e := run[api.AdminKeyList200JSONResponse](ctx, u, "admin_key_list", input(map[string]any{"box_key": key, "agent_ref": ref}, nil), func(ctx context.Context) (any, error) {
		return u.svc.AdminKeyList(ctx, api.AdminKeyListRequestObject{BoxKey: key, AgentRef: ref})
	})
	if e != nil {
		u.failPage(c, e)
		return
	}
	profile, e := run[api.AdminAgentProfileGet200JSONResponse](ctx, u, "admin_agent_profile_get", input(map[string]any{"box_key": key, "agent_ref": ref}, nil), func(ctx context.Context) (any, error) {
		return u.svc.AdminAgentProfileGet(ctx, api.AdminAgentProfileGetRequestObject{BoxKey: key, AgentRef: ref})
	})
	if e != nil {
		u.failPage(c, e)
		return
	}
	u.show(c, status, "agent", page{Title: "Agent " + agents[i].Name, Box: key, Tab: "box", Error: b,
		Data: agentData{Agent: agents[i], Keys: keys.Items, Profile: api.Profile(profile)}})
}

func (c *call) agentURL() string {
	return "/admin/boxes/" + c.path("box") + "/agents/" + c.path("agent")
}

func (u *UI) agentFlags(c *call) {
	key, ref := c.path("box"), c.path("agent")
	enabled, e := c.flag("enabled")
	listed, e2 := c.flag("listed")
	if e == nil {
		e = e2
	}
	var a api.AdminAgentUpdate200JSONResponse
	if e == nil {
		body := api.AdminAgentUpdateInput{Enabled: enabled, Listed: listed}
		a, e = run[api.AdminAgentUpdate200JSONResponse](c.r.Context(), u, "admin_agent_update", input(map[string]any{"box_key": key, "agent_ref": ref}, body), func(ctx context.Context) (any, error) {
			return u.svc.AdminAgentUpdate(ctx, api.AdminAgentUpdateRequestObject{BoxKey: key, AgentRef: ref, Body: &body})
		})
	}
	if e != nil {
		u.showAgent(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	u.done(c, "Agent "+a.Name+" is now "+onOff(a.Enabled, "enabled", "disabled")+", "+onOff(a.Listed, "listed", "not listed")+".", c.agentURL())
}

func (u *UI) agentProfile(c *call) {
	key, ref := c.path("box"), c.path("agent")
	body := api.AdminProfileSetInput{Text: c.area("text")}
	p, e := run[api.AdminAgentProfileSet200JSONResponse](c.r.Context(), u, "admin_agent_profile_set", input(map[string]any{"box_key": key, "agent_ref": ref}, body), func(ctx context.Context) (any, error) {
		return u.svc.AdminAgentProfileSet(ctx, api.AdminAgentProfileSetRequestObject{BoxKey: key, AgentRef: ref, Body: &body})
	})
	if e != nil {
		u.showAgent(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	u.done(c, "Profile saved as version "+p.ProfileVersion+".", c.agentURL())
}

func (u *UI) keyCreate(c *call) {
	key, ref := c.path("box"), c.path("agent")
	body := api.AdminKeyCreateInput{Router: new(c.checked("router"))}
	res, e := run[api.AdminKeyCreate200JSONResponse](c.r.Context(), u, "admin_key_create", input(map[string]any{"box_key": key, "agent_ref": ref}, body), func(ctx context.Context) (any, error) {
		return u.svc.AdminKeyCreate(ctx, api.AdminKeyCreateRequestObject{BoxKey: key, AgentRef: ref, Body: &body})
	})
	if e != nil {
		u.showAgent(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	u.show(c, http.StatusOK, "secret", page{Title: "API key created", Box: key, Tab: "box", Data: secretData{
		What: "key", AgentID: ref, KeyID: res.KeyId.String(), Secret: res.ApiKey, Router: res.Router, Back: c.agentURL()}})
}

func (u *UI) keyRevoke(c *call) {
	key, ref := c.path("box"), c.path("agent")
	id, e := c.pathID("key", "key_id")
	if e == nil {
		// The key is revoked through the agent page that lists it: a key of another agent (or
		// an agent the box does not have) in this URL is not found, and nothing is revoked.
		var keys api.AdminKeyList200JSONResponse
		keys, e = run[api.AdminKeyList200JSONResponse](c.r.Context(), u, "admin_key_list", input(map[string]any{"box_key": key, "agent_ref": ref}, nil), func(ctx context.Context) (any, error) {
			return u.svc.AdminKeyList(ctx, api.AdminKeyListRequestObject{BoxKey: key, AgentRef: ref})
		})
		if e == nil && !slices.ContainsFunc(keys.Items, func(k api.AdminKey) bool { return k.KeyId == id }) {
			e = apierr.NotFound().WithField("key_id")
		}
	}
	if e == nil {
		_, e = run[api.AdminKeyRevoke200JSONResponse](c.r.Context(), u, "admin_key_revoke", input(map[string]any{"box_key": key, "key_id": id}, nil), func(ctx context.Context) (any, error) {
			return u.svc.AdminKeyRevoke(ctx, api.AdminKeyRevokeRequestObject{BoxKey: key, KeyId: id})
		})
	}
	if e != nil {
		u.showAgent(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	u.done(c, "Key "+id.String()+" revoked.", c.agentURL())
}

// ---- settings ----

type setting struct {
	Name     string
	Value    int64
	Settable bool
}

type settingsData struct {
	Revision string
	Values   []setting
}

// settable are the keys a settings update accepts (SettingsPatch's fields).
var settable = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[api.SettingsPatch]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		m[name] = true
	}
	return m
}()

func (u *UI) settingsPage(c *call) { u.showSettings(c, http.StatusOK, nil) }

func (u *UI) showSettings(c *call, status int, b *banner) {
	key := c.path("box")
	s, e := run[api.AdminSettingsGet200JSONResponse](c.r.Context(), u, "admin_settings_get", input(map[string]any{"box_key": key}, nil), func(ctx context.Context) (any, error) {
		return u.svc.AdminSettingsGet(ctx, api.AdminSettingsGetRequestObject{BoxKey: key})
	})
	if e != nil {
		u.failPage(c, e)
		return
	}
	raw, _ := json.Marshal(s.Settings)
	var values map[string]int64
	json.Unmarshal(raw, &values) //nolint:errcheck // SettingsValues holds only int64 fields
	d := settingsData{Revision: s.SettingsRevision}
	for name, v := range values {
		d.Values = append(d.Values, setting{Name: name, Value: v, Settable: settable[name]})
	}
	slices.SortFunc(d.Values, func(a, b setting) int { return strings.Compare(a.Name, b.Name) })
	u.show(c, status, "settings", page{Title: "Settings of " + key, Box: key, Tab: "settings", Error: b, Data: d})
}

var settingKey = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// parseSettings reads "key=value" lines (blank lines and # comments skipped) into a patch.
// Errors name the line or the key, never the value.
func parseSettings(text string) (map[string]any, *apierr.Error) {
	patch := map[string]any{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return nil, apierr.Invalid("settings", "line "+itoa(int64(i+1))+" is not of the form key=value")
		}
		if !settingKey.MatchString(k) { // never echoed: it may be anything, a secret included
			return nil, apierr.Invalid("settings", "line "+itoa(int64(i+1))+" does not start with a setting name (lower-case, like lease_default_seconds)").
				WithReason("unknown_field")
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, apierr.Invalid("settings."+k, "must be a whole number")
		}
		if _, dup := patch[k]; dup {
			return nil, apierr.Invalid("settings."+k, "is given more than once")
		}
		patch[k] = n
	}
	return patch, nil
}

func (u *UI) settingsUpdate(c *call) {
	key, rev := c.path("box"), c.text("expected_revision")
	patch, e := parseSettings(c.area("settings"))
	if e == nil && rev == "" {
		e = apierr.Invalid("expected_revision", "is required")
	}
	var s api.AdminSettingsUpdate200JSONResponse
	if e == nil {
		in := input(map[string]any{"box_key": key, "expected_revision": rev}, map[string]any{"settings": patch})
		s, e = run[api.AdminSettingsUpdate200JSONResponse](c.r.Context(), u, "admin_settings_update", in, func(ctx context.Context) (any, error) {
			body := api.AdminSettingsUpdateInput{ExpectedRevision: &rev}
			raw, err := json.Marshal(patch)
			if err == nil {
				err = json.Unmarshal(raw, &body.Settings) // the schema check above admitted only known keys
			}
			if err != nil {
				return nil, err
			}
			return u.svc.AdminSettingsUpdate(ctx, api.AdminSettingsUpdateRequestObject{BoxKey: key, Body: &body})
		})
	}
	if e != nil {
		u.showSettings(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	u.done(c, "Settings saved; the settings revision is now "+s.SettingsRevision+".", "/admin/boxes/"+key+"/settings")
}

// ---- rooms ----

type roomRow struct {
	api.AdminRoom
	Owner string // the owner's name
}

type roomsData struct {
	Rooms  []roomRow
	Agents []api.AdminAgent
}

func (u *UI) roomsPage(c *call) { u.showRooms(c, http.StatusOK, nil) }

func (u *UI) showRooms(c *call, status int, b *banner) {
	ctx, key := c.r.Context(), c.path("box")
	rooms, e := run[api.AdminRoomList200JSONResponse](ctx, u, "admin_room_list", input(map[string]any{"box_key": key}, nil), func(ctx context.Context) (any, error) {
		return u.svc.AdminRoomList(ctx, api.AdminRoomListRequestObject{BoxKey: key})
	})
	var agents []api.AdminAgent
	if e == nil {
		agents, e = u.listAgents(ctx, key)
	}
	if e != nil {
		u.failPage(c, e)
		return
	}
	names := map[uuid.UUID]string{}
	for _, a := range agents {
		names[a.AgentId] = a.Name
	}
	d := roomsData{Agents: agents}
	for _, r := range rooms.Items {
		d.Rooms = append(d.Rooms, roomRow{AdminRoom: r, Owner: names[r.OwnerAgentId]})
	}
	u.show(c, status, "rooms", page{Title: "Rooms of " + key, Box: key, Tab: "rooms", Error: b, Data: d})
}

func (u *UI) roomArchive(c *call) {
	key := c.path("box")
	id, e := c.pathID("room", "room_id")
	var r api.AdminRoomArchive200JSONResponse
	if e == nil {
		r, e = run[api.AdminRoomArchive200JSONResponse](c.r.Context(), u, "admin_room_archive", input(map[string]any{"box_key": key, "room_id": id}, nil), func(ctx context.Context) (any, error) {
			return u.svc.AdminRoomArchive(ctx, api.AdminRoomArchiveRequestObject{BoxKey: key, RoomId: id})
		})
	}
	if e != nil {
		u.showRooms(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	u.done(c, "Room "+r.Name+" archived; it is read-only now.", "/admin/boxes/"+key+"/rooms")
}

func (u *UI) roomOwner(c *call) {
	key := c.path("box")
	id, e := c.pathID("room", "room_id")
	var r api.AdminRoomSetOwner200JSONResponse
	if e == nil {
		body := api.AdminRoomSetOwnerInput{AgentRef: c.text("agent_ref")}
		r, e = run[api.AdminRoomSetOwner200JSONResponse](c.r.Context(), u, "admin_room_set_owner", input(map[string]any{"box_key": key, "room_id": id}, body), func(ctx context.Context) (any, error) {
			return u.svc.AdminRoomSetOwner(ctx, api.AdminRoomSetOwnerRequestObject{BoxKey: key, RoomId: id, Body: &body})
		})
	}
	if e != nil {
		u.showRooms(c, e.Code.HTTPStatus(), describe(e))
		return
	}
	u.done(c, "Room "+r.Name+" has a new owner.", "/admin/boxes/"+key+"/rooms")
}

// ---- cleanup health ----

func (u *UI) cleanupPage(c *call) {
	key := c.path("box")
	s, e := run[api.AdminCleanupStatus200JSONResponse](c.r.Context(), u, "admin_cleanup_status", input(map[string]any{"box_key": key}, nil), func(ctx context.Context) (any, error) {
		return u.svc.AdminCleanupStatus(ctx, api.AdminCleanupStatusRequestObject{BoxKey: key})
	})
	if e != nil {
		u.failPage(c, e)
		return
	}
	u.show(c, http.StatusOK, "cleanup", page{Title: "Cleanup health of " + key, Box: key, Tab: "cleanup", Data: s})
}
