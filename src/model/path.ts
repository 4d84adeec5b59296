/** Model ids carried in the path (Gemini native endpoints, OpenAI legacy engines). */
function decodeSegment(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export function modelFromPath(pathname: string): string | undefined {
  let rest: string | undefined;
  if (pathname.startsWith('/v1beta/models/')) rest = pathname.slice('/v1beta/models/'.length);
  else if (pathname.startsWith('/v1/models/')) {
    rest = pathname.slice('/v1/models/'.length);
    if (rest.indexOf(':') === -1) return undefined;
  } else if (pathname.startsWith('/v1/engines/')) {
    const seg = pathname.slice('/v1/engines/'.length).split('/')[0];
    return seg ? decodeSegment(seg) : undefined;
  }
  if (rest === undefined || rest === '') return undefined;
  const seg = rest.split('/')[0]!;
  const colon = seg.indexOf(':');
  const model = colon === -1 ? seg : seg.slice(0, colon);
  return model === '' ? undefined : decodeSegment(model);
}
