import { html, type Html } from '../html';
import { page, type Notice, type Viewer } from '../layout';

/** The signed-in user's account and the password change form. */
export function accountPage(input: { viewer: Viewer; accountId: string; notice?: Notice }): Html {
  const { viewer } = input;
  return page({
    title: 'Account',
    path: '/console/account',
    viewer,
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<section class="panel" aria-labelledby="profile-heading">
        <h2 id="profile-heading">Profile</h2>
        <div class="table-wrap">
          <table>
            <tbody>
              <tr>
                <th scope="row">Name</th>
                <td dir="auto">${viewer.accountName}</td>
              </tr>
              <tr>
                <th scope="row">Email</th>
                <td dir="auto">${viewer.email}</td>
              </tr>
              <tr>
                <th scope="row">Account id</th>
                <td class="mono">${input.accountId}</td>
              </tr>
            </tbody>
          </table>
        </div>
      </section>
      <section class="panel" aria-labelledby="password-heading">
        <h2 id="password-heading">Change password</h2>
        <form method="post" action="/console/account/password">
          <input type="hidden" name="csrf_token" value="${viewer.csrfToken}" />
          <input type="text" name="username" autocomplete="username" value="${viewer.email}" hidden />
          <div class="field">
            <label for="current_password">Current password</label>
            <input
              id="current_password"
              name="current_password"
              type="password"
              autocomplete="current-password"
              required
              maxlength="200"
            />
          </div>
          <div class="field">
            <label for="new_password">New password <span class="hint">at least 10 characters</span></label>
            <input
              id="new_password"
              name="new_password"
              type="password"
              autocomplete="new-password"
              required
              minlength="10"
              maxlength="200"
            />
          </div>
          <button class="btn" type="submit">Change password</button>
          <p class="hint">Changing it signs out every other browser where you are signed in.</p>
        </form>
      </section>`,
  });
}
