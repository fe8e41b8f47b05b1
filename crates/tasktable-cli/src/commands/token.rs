//! `tasktable token new`: a random bearer token, and the tokens-file line that lets a
//! server accept it. The server keeps only the digest, so the token is shown once, here.

use crate::error::CliError;
use crate::output;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// How every token `token new` makes begins.
pub const TOKEN_PREFIX: &str = "tt_";
use base64::Engine;
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use rand::TryRngCore;
use serde_json::json;
use tasktable_server::{token_digest, Role};

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Print a new random token and its tokens-file line.
    New(NewToken),
}

#[derive(Args, Debug)]
pub struct NewToken {
    /// What the token may do: admin (everything), operator (read, submit, change),
    /// worker (the pull protocol only) or reader (read only).
    #[arg(long, value_parser = PossibleValuesParser::new(Role::ALL.map(Role::as_str)))]
    role: String,
    /// A name for the token, shown in the server's log and errors; default ROLE-<8 hex>.
    #[arg(long)]
    name: Option<String>,
    /// Limit a worker token to this queue (repeat for more): it can claim from no other.
    #[arg(long = "queue", value_name = "QUEUE")]
    queues: Vec<String>,
    /// Limit a worker token's workers to this group (repeat for more): they can join no
    /// other, nor claim tasks aimed at another.
    #[arg(long = "group", value_name = "GROUP")]
    groups: Vec<String>,
}

pub fn run(command: &TokenCommand, json: bool) -> Result<(), CliError> {
    let TokenCommand::New(args) = command;
    let role: Role = args
        .role
        .parse()
        .map_err(|e: tasktable_server::TokenConfigError| CliError::usage(e.0))?;
    if !args.queues.is_empty() {
        if role != Role::Worker {
            return Err(CliError::usage("--queue limits only worker tokens"));
        }
        tasktable_server::auth::parse_queue_list(&args.queues.join(","), ',')
            .map_err(|e| CliError::usage(e.0))?;
    }
    if !args.groups.is_empty() {
        if role != Role::Worker {
            return Err(CliError::usage("--group limits only worker tokens"));
        }
        tasktable_server::auth::parse_group_list(&args.groups.join(","), ',')
            .map_err(|e| CliError::usage(e.0))?;
    }
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.try_fill_bytes(&mut bytes).map_err(|e| {
        CliError::failure(format!("the operating system gave no random bytes: {e}"))
    })?;
    // A prefix of its own: the token never starts with '-' (which a command line would
    // read as an option), and a secret scanner can tell it from other random strings.
    let token = format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
    let digest = token_digest(&token);
    let name = match &args.name {
        Some(name) if name.is_empty() || name.chars().any(char::is_whitespace) => {
            return Err(CliError::usage("--name must be one word, without spaces"));
        }
        Some(name) => name.clone(),
        None => format!("{role}-{}", &digest["sha256:".len()..][..8]),
    };
    let (mut line, mut env_role) = (format!("{role} {name} {digest}"), role.to_string());
    if !args.queues.is_empty() {
        line.push_str(&format!(" queues={}", args.queues.join(",")));
        env_role.push_str(&format!("@{}", args.queues.join("+")));
    }
    if !args.groups.is_empty() {
        line.push_str(&format!(" groups={}", args.groups.join(",")));
        env_role.push_str(&format!("#{}", args.groups.join("+")));
    }
    if json {
        return output::json(&json!({
            "role": role, "name": name, "token": token, "tokens_file_line": line,
            "queues": (!args.queues.is_empty()).then_some(&args.queues),
            "groups": (!args.groups.is_empty()).then_some(&args.groups),
        }));
    }
    output::emit(&format!(
        "token (give it to clients as --token or TASKTABLE_TOKEN; it is not shown again):\n  {token}\n\
         tokens-file line (add it to the file given to `tasktable serve --tokens-file`):\n  {line}\n\
         or give the token to the server itself as TASKTABLE_TOKENS={env_role}:<token> (named {} there)\n",
        tasktable_server::auth::env_token_name(&token)
    ))
}
