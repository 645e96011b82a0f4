"""The workflows shipped with teamctl (``teamctl workflow list`` shows them); a project's
``.team/workflows/<name>.py`` of the same name replaces one."""
