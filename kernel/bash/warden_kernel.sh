# Warden's bash kernel: a live bash shell driven over the kernel protocol
# (docs/kernel-protocol.md). Started as
#   /bin/bash --noprofile --norc warden_kernel.sh
# inside the sandbox, cwd /workspace, channel on $WARDEN_CHANNEL_FD (3).
#
# Responsible for: reading `execute <id> <nbytes>\n<code>` frames, running
# each cell in one persistent shell (cwd, variables, arrays, functions,
# aliases, exported environment, shell options survive between cells), and
# answering with `<nbytes>\n<json>` frames: ready, error (interrupts only) and
# done with "exit_code" (the status of the cell's last command; non-zero ->
# status "error", and no error frame: the shell's own messages are on stderr).
# Cell commands write straight to fds 1/2, so output streams as it happens and
# is in the pipes before `done` is written; anything they print is data.
#
# How it works. The file runs twice:
#   1. Non-interactively (as started): it moves the channel to fd 254, closes
#      fd 3 and re-executes bash as an *interactive* shell with this file as
#      its rcfile (stderr muted while bash starts, to hide "no job control in
#      this shell"; the real stderr rides along on fd 253).
#   2. As the rcfile: sets the shell up and installs the serving loop as
#      PROMPT_COMMAND. An interactive shell runs PROMPT_COMMAND before every
#      prompt, at global scope (so `declare` in a cell makes globals), and the
#      loop never returns: it reads a frame, `eval`s the cell, reports, reads
#      the next frame. Whenever something aborts the loop (see below) bash goes
#      back to its top level, runs PROMPT_COMMAND again, and the loop first
#      reports the cell that was cut short. stdin stays at EOF and is never
#      read, because PROMPT_COMMAND never finishes.
#
# Why interactive: a non-interactive bash *exits* on errors that an
# interactive one survives: an unbound variable under `set -u` or
# `${x:?msg}` (very common: LLM scripts start with `set -euo pipefail`).
# Interactive, such an error aborts the current command line of the cell
# (the following lines still run, as when pasting into a terminal).
#
# SIGINT (the supervisor interrupts with SIGINT to the process group):
#   - Non-interactive bash with no trap dies of SIGINT if its foreground child
#     died of it; with a trap it runs the trap and goes on with the *next*
#     command, so a trap cannot stop the rest of a cell. Interactive bash (no
#     trap) instead abandons everything it is executing - the rest of the
#     cell, loops, functions - and longjmps to its top level: that is the
#     interrupt here. The foreground command gets the SIGINT from the process
#     group itself (job control is off, so it shares the group) and dies of it
#     as usual; background jobs (`cmd &`) ignore SIGINT, as in any
#     non-job-control shell. The cell reports error ename "Interrupted", done
#     status "interrupted", exit_code 130; state set before the interrupt stays.
#     bash prints a newline on stderr when it abandons a command (its
#     terminal's "^C" line ending), also for exit and errexit below.
#     A foreground program that handles SIGINT itself and exits normally
#     (not killed by it) lets the cell go on, as in any bash.
#   - While idle and while the kernel reports a cell, SIGINT is ignored
#     (`trap '' INT`); `trap - INT` restores bash's own handling just before
#     each cell, so a cell's own INT trap lasts only until the cell ends.
#     `trap - INT` goes through SIG_DFL for one syscall (bash restores the
#     original disposition, then installs its handler): a SIGINT landing in
#     that microsecond, as a cell starts, would kill the shell. (A trap
#     instead of bash's handler avoids that but cannot abort the cell: a
#     SIGINT the trap sends to its own shell is not acted on.)
#
# exit, set -e: a cell does not end the shell.
#   - `exit [n]` in the shell itself (not in a subshell, `$(...)` or pipeline,
#     where it is the real builtin) is a readonly function: it ends the cell
#     with exit_code n (status ok for 0, error otherwise) by sending the shell a
#     SIGINT, the same top-level abort as an interrupt. `builtin exit` still
#     ends the kernel (the supervisor then reports the session lost), as does
#     `exec cmd`, `kill -9 $$`...
#   - errexit would end even an interactive bash. The ERR trap fires just
#     before errexit exits, in exactly the cases errexit applies; it runs
#     `__warden_err`, which (with `set -e` on, in the shell itself) aborts the
#     cell the same way, with the failing command's status as exit_code. So
#     `set -e` ends the *cell* at the first failure and stays on for later
#     cells, like in a script. The ERR trap is re-installed before every cell
#     (and errtrace, set -E, is on so it reaches functions): a cell's own ERR
#     trap lasts until the cell ends. -e, -u and -x are switched off while the
#     kernel itself runs and restored before the next cell.
#   - `break`/`continue` at a cell's top level would hit the serving loop;
#     the loop then reports the cell (cut short) and starts again.
#
# Protocol quirks: frames are read with `read -r -u 254` (header) and
# `read -r -N <nbytes>` with LC_ALL=C (so -N counts bytes; the code is then
# run in the user's locale; bash reads a socket a byte at a time for the
# header, in chunks for -N). A NUL byte in a cell's code would be dropped by
# read and desynchronise the channel (bash variables cannot hold NUL). Frames the kernel writes hold only ASCII (ids,
# counts, fixed strings, BASH_VERSION), so ${#body} is their byte length. The
# channel is on fd 254 and closed around each cell (`254>&-`), so commands
# do not inherit it; a cell that breaks fd 254 only breaks its own session.
# Kernel names start with __warden_ (variables, functions); a cell starts
# with $? = the previous cell's status, and BASH_REMATCH as the last cell
# left it.

if [[ $- != *i* ]]; then
  # --- 1. as started: move the channel, become interactive -----------------
  __warden_fd=${WARDEN_CHANNEL_FD:-3}
  [[ $__warden_fd =~ ^[0-9]+$ ]] || exit 70
  exec 254<&"$__warden_fd" || exit 70
  if [[ $__warden_fd != 254 ]]; then eval "exec $__warden_fd<&-"; fi
  unset __warden_fd
  export SHLVL=$(( ${SHLVL:-1} - 1 ))
  # An empty PS1 in the environment makes Debian's /etc/bash.bashrc (which
  # bash reads before --rcfile) return at once.
  export PS1=
  exec -a bash "$BASH" --noprofile --rcfile "${BASH_SOURCE[0]}" -i 253>&2 2>/dev/null
  exit 70
fi

# --- 2. as the interactive shell's rcfile ---------------------------------
exec 2>&253 253>&-

set +o history +H +m -E
unset HISTFILE MAILCHECK MAIL MAILPATH PROMPT_DIRTRIM
PS1='' PS2='' PS0=''
export -n PS1

__warden_pid=$$
__warden_id=          # id of the running cell; empty while idle
__warden_running=     # 1 while the cell's own code runs (not the kernel's)
__warden_count=0      # execution_count
__warden_last=0       # the last cell's status: $? when the next one starts
__warden_abort=       # exit code set by exit/errexit before aborting a cell
__warden_opts=        # the cell's -e/-u/-x, switched off while the kernel runs
__warden_code=
__warden_saved=()     # a cell's own variables' earlier values (KEY=value, or KEY if unset)
# Put around the cell's code. eval numbers lines from 0 here: the leading
# newline makes the first line 1. With -x, set -x/+x go inside the eval (the
# +x quietly, recording $? and whether -x is still on), so that xtrace shows
# the cell's commands and not the kernel's.
__warden_pre=$'\n'
__warden_post=
__warden_st=
__warden_xon=
__warden_xpre=$'builtin set -x\n'
__warden_xpost=$'\n{ __warden_st=$?; __warden_xon=${-//[^x]/}; builtin set +x; } 2>/dev/null'

# Ends the cell (not the shell) with status $1: a SIGINT to the shell itself
# abandons whatever runs, back to the serving loop (see the top of the file).
__warden_abort_cell() {
  __warden_abort=$1
  builtin kill -INT "$__warden_pid"
}

exit() {
  local __warden_s=$?
  if [[ $BASHPID != "$__warden_pid" || -z $__warden_running ]]; then
    builtin exit "$@"
  fi
  if (( $# > 1 )); then
    builtin printf 'bash: exit: too many arguments\n' >&2
    return 1
  fi
  if (( $# == 1 )); then
    local __warden_n=${1//[[:space:]]/}
    __warden_n=${__warden_n#[-+]}
    if [[ -n $__warden_n && $__warden_n != *[!0-9]* ]]; then
      __warden_s=$(( $1 & 255 ))
    else
      builtin printf 'bash: exit: %s: numeric argument required\n' "$1" >&2
      __warden_s=2
    fi
  fi
  __warden_abort_cell "$__warden_s"
}

# The ERR trap: errexit, but ending the cell instead of the shell.
__warden_err() {
  local __warden_s=$?
  if [[ ${-//[^e]/} && $BASHPID == "$__warden_pid" && -n $__warden_running ]]; then
    __warden_abort_cell "$__warden_s"
  fi
  return "$__warden_s"
}

__warden_ret() {
  return "$__warden_last"
}

# The kernel's own code runs without the cell's -e/-u/-x (a cell's set -u
# must not break the kernel); they come back before the next cell.
__warden_quiet() {
  __warden_opts=${-//[^eux]/}$__warden_xon
  __warden_xon=
  if [[ -n $__warden_opts ]]; then builtin set +eux; fi
}

# Reports the running cell: $1 its status, $2 "done" or "aborted" (cut short).
# SIGINT is ignored from here until the next cell starts.
__warden_finish() {
  local __warden_s=$1 __warden_status=ok __warden_frames=
  if [[ -n $__warden_abort ]]; then
    __warden_s=$__warden_abort
    __warden_abort=
  elif [[ $2 == aborted && $__warden_s == 130 ]]; then
    __warden_status=interrupted
    __warden_frames="{\"type\":\"error\",\"id\":$__warden_id,\"ename\":\"Interrupted\",\"evalue\":\"interrupted by SIGINT\",\"traceback\":[]}"
    __warden_frames="${#__warden_frames}"$'\n'"$__warden_frames"
  fi
  if [[ $__warden_s != 0 && $__warden_status == ok ]]; then __warden_status=error; fi
  __warden_last=$__warden_s
  if (( ${#__warden_saved[@]} )); then
    local __warden_e
    for __warden_e in "${__warden_saved[@]}"; do
      if [[ $__warden_e == *=* ]]; then builtin export "$__warden_e"; else builtin unset "$__warden_e"; fi
    done
    __warden_saved=()
  fi
  local __warden_done="{\"type\":\"done\",\"id\":$__warden_id,\"execution_count\":$__warden_count,\"status\":\"$__warden_status\",\"exit_code\":$__warden_s}"
  __warden_id=
  # One write for the cell's frames.
  builtin printf '%s' "$__warden_frames${#__warden_done}"$'\n'"$__warden_done" >&254
}

# Exports a cell's own variables (`<length>:<KEY=value>` entries), keeping
# what they were in __warden_saved for __warden_finish to put back.
__warden_envset() {
  local LC_ALL=C __warden_raw=$1 __warden_len __warden_entry __warden_k
  while [[ -n $__warden_raw ]]; do
    __warden_len=${__warden_raw%%:*}
    __warden_raw=${__warden_raw#*:}
    __warden_entry=${__warden_raw:0:__warden_len}
    __warden_raw=${__warden_raw:__warden_len}
    __warden_k=${__warden_entry%%=*}
    if [[ -v $__warden_k ]]; then
      __warden_saved+=("$__warden_k=${!__warden_k}")
    else
      __warden_saved+=("$__warden_k")
    fi
    builtin export "$__warden_entry"
  done
}

# Called after each cell that ran to its end.
__warden_done() {
  local __warden_s=$?
  __warden_running=
  # A cell that turned -x on: stop tracing the kernel at once.
  [[ ${-//[^x]/} ]] && { __warden_xon=x; builtin set +x; } 2>/dev/null
  builtin trap '' INT
  if [[ -n $__warden_st ]]; then
    __warden_s=$__warden_st
    __warden_st=
  fi
  __warden_quiet
  __warden_finish "$__warden_s" done
}

# The loop's condition: reports a cell cut short (interrupt, exit, errexit,
# break/continue), then reads the next frame and prepares the shell for it.
__warden_next() {
  local __warden_s=$?
  __warden_running=
  [[ ${-//[^x]/} ]] && { __warden_xon=x; builtin set +x; } 2>/dev/null
  builtin trap '' INT
  if [[ -n $__warden_id ]]; then
    __warden_st=
    __warden_quiet
    __warden_finish "$__warden_s" aborted
  fi
  local __warden_h __warden_n __warden_envraw=
  LC_ALL=C IFS= builtin read -r -u 254 __warden_h || builtin exit 0
  if [[ $__warden_h == "env "* ]]; then
    # `env <id> <nbytes>`: variables for the cell that follows only.
    __warden_n=${__warden_h##* }
    if [[ -z $__warden_n || $__warden_n == *[!0-9]* ]]; then
      builtin printf 'warden kernel: protocol error: bad header\n' >&2
      builtin exit 2
    fi
    if (( __warden_n > 0 )); then
      LC_ALL=C IFS= builtin read -r -N "$__warden_n" -u 254 __warden_envraw || builtin exit 0
    fi
    LC_ALL=C IFS= builtin read -r -u 254 __warden_h || builtin exit 0
  fi
  __warden_n=${__warden_h##* }
  __warden_h=${__warden_h% *}
  __warden_id=${__warden_h#execute }
  if [[ $__warden_h != "execute $__warden_id" || -z $__warden_id || $__warden_id == *[!0-9]* ||
        -z $__warden_n || $__warden_n == *[!0-9]* ]]; then
    builtin printf 'warden kernel: protocol error: bad header\n' >&2
    builtin exit 2
  fi
  __warden_code=
  if (( __warden_n > 0 )); then
    LC_ALL=C IFS= builtin read -r -N "$__warden_n" -u 254 __warden_code || builtin exit 0
  fi
  [[ -n $__warden_envraw ]] && __warden_envset "$__warden_envraw"
  __warden_count=$(( __warden_count + 1 ))
  builtin trap '__warden_err' ERR
  builtin trap - INT
  if [[ $__warden_opts == *x* ]]; then
    __warden_pre=$__warden_xpre __warden_post=$__warden_xpost
    __warden_opts=${__warden_opts//x/}
  else
    __warden_pre=$'\n' __warden_post=
  fi
  __warden_running=1
  if [[ -n $__warden_opts ]]; then builtin set "-$__warden_opts"; fi
  return 0
}

readonly -f exit __warden_abort_cell __warden_err __warden_ret __warden_quiet \
  __warden_finish __warden_done __warden_next __warden_envset
readonly __warden_xpre __warden_xpost __warden_pid

# The serving loop (see the top of the file). `__warden_ret && :` gives the
# cell the previous cell's status as $? (an && list: no errexit). After a
# `break` out of the loop, it starts itself again.
PROMPT_COMMAND='while __warden_next; do __warden_ret && :; \eval -- "$__warden_pre$__warden_code$__warden_post" 254>&-; __warden_done; done; \eval -- "$PROMPT_COMMAND"'
readonly PROMPT_COMMAND

builtin trap '' INT
__warden_ready="{\"type\":\"ready\",\"language\":\"bash\",\"version\":\"${BASH_VERSION}\"}"
builtin printf '%s' "${#__warden_ready}"$'\n'"$__warden_ready" >&254
unset __warden_ready
